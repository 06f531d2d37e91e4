package log

// The producer state snapshot file, producer-state.snapshot in the
// partition directory. All integers are big-endian:
//
//	magic      [4]byte  "MRPS"
//	version    int16    producerSnapshotVersion
//	crc        uint32   CRC-32C (Castagnoli) of every byte after this field
//	offset     int64    log end offset the state reflects: it covers
//	                    exactly the batches below this offset
//	producers  int32    number of producer entries
//	per producer:
//	  producerID     int64
//	  epoch          int16
//	  lastTimestamp  int64   largest timestamp of its last batch (ms)
//	  txnFirstOffset int64   first offset of its ongoing transaction, -1
//	                         if none (version 2 on)
//	  coordEpoch     int32   coordinator epoch of its last transaction
//	                         marker, -1 if none (version 2 on)
//	  batches        int8    1 to producerBatchesKept
//	  per batch, oldest first:
//	    firstSeq     int32
//	    lastSeq      int32
//	    firstOffset  int64
//	    lastOffset   int64
//
// Version 1 (written before transactions) lacks the two transaction
// fields; it is read as having no ongoing transaction.
//
// It is replaced atomically: written to a temporary file (which Open
// removes if a crash leaves it behind), fsynced, renamed over the old one,
// and the directory fsynced.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"

	"millrace/internal/durable"
)

const (
	// producerSnapshotFile is the snapshot's name in the partition directory.
	producerSnapshotFile = "producer-state.snapshot"
	// producerSnapshotMagic opens every snapshot.
	producerSnapshotMagic = "MRPS"
	// producerSnapshotVersion is the format version written.
	producerSnapshotVersion = 2
	// producerSnapshotVersion1 is the version without transaction fields,
	// still read.
	producerSnapshotVersion1 = 1
	// producerSnapshotHeader: magic, version, crc, offset, count.
	producerSnapshotHeader = 4 + 2 + 4 + 8 + 4
	// producerSnapshotEntryFixed: producerID, epoch, lastTimestamp,
	// txnFirstOffset, coordEpoch, batch count.
	producerSnapshotEntryFixed = 8 + 2 + 8 + 8 + 4 + 1
	// producerSnapshotEntryFixedV1: version 1's, without the transaction
	// fields.
	producerSnapshotEntryFixedV1 = 8 + 2 + 8 + 1
	// producerSnapshotBatch: firstSeq, lastSeq, firstOffset, lastOffset.
	producerSnapshotBatch = 4 + 4 + 8 + 8
)

// producerSnapshot is a decoded snapshot.
type producerSnapshot struct {
	offset    int64
	producers map[int64]*producerEntry
}

// encodeProducerSnapshot renders a snapshot in the file format.
func encodeProducerSnapshot(s producerSnapshot) []byte {
	size := producerSnapshotHeader
	for _, e := range s.producers {
		size += producerSnapshotEntryFixed + len(e.batches)*producerSnapshotBatch
	}
	b := make([]byte, 0, size)
	be := binary.BigEndian
	b = append(b, producerSnapshotMagic...)
	b = be.AppendUint16(b, producerSnapshotVersion)
	b = be.AppendUint32(b, 0) // crc, filled in below
	b = be.AppendUint64(b, uint64(s.offset))
	b = be.AppendUint32(b, uint32(len(s.producers)))
	for id, e := range s.producers {
		b = be.AppendUint64(b, uint64(id))
		b = be.AppendUint16(b, uint16(e.epoch))
		b = be.AppendUint64(b, uint64(e.lastTimestamp))
		b = be.AppendUint64(b, uint64(e.txnStart()))
		b = be.AppendUint32(b, uint32(e.coordinatorEpoch-1))
		b = append(b, byte(len(e.batches)))
		for _, pb := range e.batches {
			b = be.AppendUint32(b, uint32(pb.firstSeq))
			b = be.AppendUint32(b, uint32(pb.lastSeq))
			b = be.AppendUint64(b, uint64(pb.firstOffset))
			b = be.AppendUint64(b, uint64(pb.lastOffset))
		}
	}
	be.PutUint32(b[6:], crc32.Checksum(b[10:], castagnoli))
	return b
}

var errBadProducerSnapshot = errors.New("malformed producer state snapshot")

// decodeProducerSnapshot parses a snapshot, checking sizes before reading.
func decodeProducerSnapshot(b []byte) (producerSnapshot, error) {
	be := binary.BigEndian
	if len(b) < producerSnapshotHeader || string(b[:4]) != producerSnapshotMagic {
		return producerSnapshot{}, fmt.Errorf("%w: no header", errBadProducerSnapshot)
	}
	version := be.Uint16(b[4:])
	fixed := producerSnapshotEntryFixed
	switch version {
	case producerSnapshotVersion:
	case producerSnapshotVersion1:
		fixed = producerSnapshotEntryFixedV1
	default:
		return producerSnapshot{}, fmt.Errorf("%w: version %d", errBadProducerSnapshot, version)
	}
	if got, want := crc32.Checksum(b[10:], castagnoli), be.Uint32(b[6:]); got != want {
		return producerSnapshot{}, fmt.Errorf("%w: CRC-32C %08x, header says %08x", errBadProducerSnapshot, got, want)
	}
	s := producerSnapshot{offset: int64(be.Uint64(b[10:]))}
	count := int64(be.Uint32(b[18:]))
	rest := b[producerSnapshotHeader:]
	if s.offset < 0 || count > int64(len(rest)/fixed) {
		return producerSnapshot{}, fmt.Errorf("%w: offset %d, %d entries in %d bytes", errBadProducerSnapshot, s.offset, count, len(rest))
	}
	s.producers = make(map[int64]*producerEntry, count)
	for range count {
		if len(rest) < fixed {
			return producerSnapshot{}, fmt.Errorf("%w: truncated entry", errBadProducerSnapshot)
		}
		id := int64(be.Uint64(rest))
		e := &producerEntry{epoch: int16(be.Uint16(rest[8:])), lastTimestamp: int64(be.Uint64(rest[10:]))}
		if version >= producerSnapshotVersion {
			if first := int64(be.Uint64(rest[18:])); first >= 0 {
				e.txnOngoing, e.txnFirstOffset = true, first
			} else if first != -1 {
				return producerSnapshot{}, fmt.Errorf("%w: producer %d transaction offset %d", errBadProducerSnapshot, id, first)
			}
			e.coordinatorEpoch = max(int32(be.Uint32(rest[26:])), -1) + 1
		}
		n := int(rest[fixed-1])
		rest = rest[fixed:]
		if n < 1 || n > producerBatchesKept || len(rest) < n*producerSnapshotBatch {
			return producerSnapshot{}, fmt.Errorf("%w: producer %d has %d batches", errBadProducerSnapshot, id, n)
		}
		e.batches = make([]producerBatch, n)
		for i := range e.batches {
			e.batches[i] = producerBatch{
				firstSeq:    int32(be.Uint32(rest)),
				lastSeq:     int32(be.Uint32(rest[4:])),
				firstOffset: int64(be.Uint64(rest[8:])),
				lastOffset:  int64(be.Uint64(rest[16:])),
			}
			rest = rest[producerSnapshotBatch:]
		}
		s.producers[id] = e
	}
	if len(rest) != 0 {
		return producerSnapshot{}, fmt.Errorf("%w: %d trailing bytes", errBadProducerSnapshot, len(rest))
	}
	return s, nil
}

// readProducerSnapshot reads the snapshot in dir; nil when there is none.
func readProducerSnapshot(dir string) (*producerSnapshot, error) {
	b, err := os.ReadFile(filepath.Join(dir, producerSnapshotFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	s, err := decodeProducerSnapshot(b)
	if err != nil {
		return nil, err
	}
	return &s, nil
}

// writeProducerSnapshot atomically replaces the snapshot in dir.
func writeProducerSnapshot(dir string, s producerSnapshot) error {
	path := filepath.Join(dir, producerSnapshotFile)
	return durable.WriteFile(path, encodeProducerSnapshot(s))
}
