package embedded

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// On-disk layout of a store directory:
//
//	<dir>/LOCK           flock'ed while a Server has the directory open
//	<dir>/snapshot       the tree as of transaction snapshot.zxid (see snapshotMagic)
//	<dir>/wal            transactions after the snapshot (see walMagic)
//
// Both files are a magic string followed by frames. A frame is
//
//	length  uint32 little-endian: number of payload bytes
//	crc     uint32 little-endian: CRC-32C (Castagnoli) of the payload
//	payload length bytes
//
// Strings and byte slices inside payloads are a uvarint length then the bytes;
// integers are varints (signed) or uvarints (unsigned) as noted per field.
const (
	// walFile is the write-ahead log's file name.
	walFile = "wal"
	// snapshotFile is the snapshot's file name; it is replaced atomically
	// (durable.WriteFile).
	snapshotFile = "snapshot"
	// lockFile is held with flock so two processes never share a directory.
	lockFile = "LOCK"

	// walMagic opens the WAL. Every frame after it is one transaction:
	//	zxid   uvarint: transaction id, strictly increasing
	//	count  uvarint: number of ops
	//	ops    count × (kind byte, then the kind's fields; see op* constants)
	// A transaction is applied whole or not at all; a frame cut short or with a
	// bad CRC is a torn tail and is cut off at replay.
	walMagic = "MRCWAL01"

	// snapshotMagic opens the snapshot. Its first frame is the header:
	//	zxid          uvarint: last transaction included
	//	lastSession   uvarint: highest session ID ever handed out
	//	nodeCount     uvarint: number of node frames that follow
	// then nodeCount node frames, parents before children:
	//	path     string
	//	data     bytes
	//	version  varint
	//	cversion varint
	//	seq      varint: children ever created (sequential-name counter)
	//	ctime    varint: creation time, Unix nanoseconds
	//	mtime    varint: modification time, Unix nanoseconds
	//	owner    varint: ephemeral owner's session ID, 0 for persistent
	// Ephemerals are kept so that later WAL transactions touching them replay;
	// Open deletes every ephemeral after replay (their sessions died with the
	// process).
	snapshotMagic = "MRCSNP02"

	// frameHeaderSize is length + crc.
	frameHeaderSize = 8
	// maxFrameSize bounds a frame's announced length so a corrupt length never
	// drives a huge allocation; no transaction comes near it.
	maxFrameSize = 256 << 20
)

// Op kinds inside a WAL transaction.
const (
	// opCreate: path string, data bytes, owner varint (session ID or 0),
	// time varint (Unix ns). The parent's cversion is bumped.
	opCreate byte = 1
	// opSet: path string, data bytes, time varint. The version is bumped.
	opSet byte = 2
	// opDelete: path string. The parent's cversion is bumped.
	opDelete byte = 3
	// opSession: id uvarint. A session ID was handed out; replay keeps the
	// highest so IDs never repeat across restarts.
	opSession byte = 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errCorrupt marks undecodable content inside a frame whose CRC matched.
var errCorrupt = errors.New("embedded: corrupt record")

// walOp is one primitive change recorded in the WAL.
type walOp struct {
	kind  byte
	path  string
	data  []byte
	owner int64 // opCreate: ephemeral owner; opSession: the ID
	time  int64
}

// appendFrame appends a framed payload to buf.
func appendFrame(buf, payload []byte) []byte {
	buf = binary.LittleEndian.AppendUint32(buf, uint32(len(payload)))
	buf = binary.LittleEndian.AppendUint32(buf, crc32.Checksum(payload, castagnoli))
	return append(buf, payload...)
}

// readFrame reads one frame. It returns io.EOF at a clean end, and
// io.ErrUnexpectedEOF or errCorrupt for a torn or damaged frame.
func readFrame(r io.Reader) ([]byte, error) {
	var header [frameHeaderSize]byte
	if _, err := io.ReadFull(r, header[:]); err != nil {
		return nil, err
	}
	length := binary.LittleEndian.Uint32(header[:4])
	if length > maxFrameSize {
		return nil, fmt.Errorf("%w: frame length %d", errCorrupt, length)
	}
	payload := make([]byte, length)
	if _, err := io.ReadFull(r, payload); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	if crc32.Checksum(payload, castagnoli) != binary.LittleEndian.Uint32(header[4:]) {
		return nil, fmt.Errorf("%w: checksum mismatch", errCorrupt)
	}
	return payload, nil
}

func appendBytes(buf, b []byte) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(b)))
	return append(buf, b...)
}

func appendString(buf []byte, s string) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(s)))
	return append(buf, s...)
}

// encodeTxn encodes a WAL transaction payload.
func encodeTxn(zxid int64, ops []walOp) []byte {
	buf := binary.AppendUvarint(nil, uint64(zxid))
	buf = binary.AppendUvarint(buf, uint64(len(ops)))
	for _, op := range ops {
		buf = append(buf, op.kind)
		switch op.kind {
		case opCreate:
			buf = appendString(buf, op.path)
			buf = appendBytes(buf, op.data)
			buf = binary.AppendVarint(buf, op.owner)
			buf = binary.AppendVarint(buf, op.time)
		case opSet:
			buf = appendString(buf, op.path)
			buf = appendBytes(buf, op.data)
			buf = binary.AppendVarint(buf, op.time)
		case opDelete:
			buf = appendString(buf, op.path)
		case opSession:
			buf = binary.AppendUvarint(buf, uint64(op.owner))
		}
	}
	return buf
}

// decoder reads fields from a payload; the first error sticks.
type decoder struct {
	buf []byte
	err error
}

func (d *decoder) fail() {
	if d.err == nil {
		d.err = errCorrupt
	}
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.buf)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.buf = d.buf[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.buf)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.buf = d.buf[n:]
	return v
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.buf)) {
		d.fail()
		return nil
	}
	b := d.buf[:n:n]
	d.buf = d.buf[n:]
	return b
}

func (d *decoder) byte() byte {
	if d.err != nil {
		return 0
	}
	if len(d.buf) == 0 {
		d.fail()
		return 0
	}
	b := d.buf[0]
	d.buf = d.buf[1:]
	return b
}

// decodeTxn decodes a WAL transaction payload.
func decodeTxn(payload []byte) (int64, []walOp, error) {
	d := &decoder{buf: payload}
	zxid := int64(d.uvarint())
	count := d.uvarint()
	if d.err == nil && count > uint64(len(payload)) {
		d.fail()
	}
	var ops []walOp
	for i := uint64(0); i < count && d.err == nil; i++ {
		op := walOp{kind: d.byte()}
		switch op.kind {
		case opCreate:
			op.path = string(d.bytes())
			op.data = d.bytes()
			op.owner = d.varint()
			op.time = d.varint()
		case opSet:
			op.path = string(d.bytes())
			op.data = d.bytes()
			op.time = d.varint()
		case opDelete:
			op.path = string(d.bytes())
		case opSession:
			op.owner = int64(d.uvarint())
		default:
			d.fail()
		}
		ops = append(ops, op)
	}
	if d.err == nil && len(d.buf) != 0 {
		d.fail()
	}
	if d.err != nil {
		return 0, nil, fmt.Errorf("%w: transaction", d.err)
	}
	return zxid, ops, nil
}
