package lake

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Undecodable batches.
//
// A batch whose records cannot be decompressed (junk inside a valid CRC, a
// codec the client does not know, or more than MaxDecompressedBatchBytes of
// output) would otherwise stop the sink for good: franz-go reports the error
// and fetches the same bytes again, forever. The worker instead dead-letters
// a description of the batch and moves its position past the batch's last
// offset.
//
// How the batch is found: franz-go stops a partition for good (until
// SetOffsets) when the decompressor's error wraps kgo.ErrMaxDecompress, and
// reports kgo.ErrDecompressTooLarge, which carries the batch's first offset
// and the offset after its last record, read from the batch header it had
// in hand. stoppingDecompressor therefore wraps EVERY decompression failure
// in ErrMaxDecompress: the partition is not fetched again in a hot loop, and
// the worker learns the batch's exact offset range without a second parse.
// franz-go drops the underlying cause on the way, so the worker reads the
// batch once more with a direct Fetch (kgoBatchReader) to put the codec's
// own error and the batch's size in the dead letter; that read is only
// descriptive, and the skip does not depend on it.

// reasonUndecodableBatch is the Reason of a dead letter that stands for a
// whole batch.
const reasonUndecodableBatch = "undecodable batch"

// boundedDecompressor returns franz-go's own decompressor (gzip, snappy
// including the xerial framing, lz4, zstd), bounded at max bytes of output
// per batch. franz-go builds that bounded decoder only inside a client
// (MaxDecompressBatchBytes); a client that is never connected is the way to
// get one without writing the codecs again.
func boundedDecompressor(max int) (kgo.Decompressor, error) {
	cl, err := kgo.NewClient(kgo.MaxDecompressBatchBytes(max))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	d, ok := cl.OptValue(kgo.WithDecompressor).(kgo.Decompressor)
	if !ok || d == nil {
		return nil, errors.New("lake: the kafka client has no decompressor")
	}
	return d, nil
}

// stoppingDecompressor decompresses with a bounded decompressor and makes
// every failure stop the partition (see the comment at the top).
type stoppingDecompressor struct {
	inner kgo.Decompressor
}

func (d stoppingDecompressor) Decompress(src []byte, codec kgo.CompressionCodecType) ([]byte, error) {
	out, err := d.inner.Decompress(src, codec)
	if err != nil && !errors.Is(err, kgo.ErrMaxDecompress) {
		err = fmt.Errorf("%w: %w", kgo.ErrMaxDecompress, err)
	}
	return out, err
}

// undecodableBatch locates a batch the client could not decode.
type undecodableBatch struct {
	tp    topicPartition
	first int64 // the batch's first offset
	next  int64 // the offset after its last record
	err   error // what the client reported
}

// batchDescription is what a direct read of a batch tells about it.
type batchDescription struct {
	bytes          int       // the whole batch, header included
	compression    string    // the codec named by its attributes
	records        int32     // the record count its header claims
	firstTimestamp time.Time // its header's first timestamp
	err            string    // why its records cannot be decompressed
}

// batchReader describes the batch at an offset; the kgo implementation is
// below, tests use fakes.
type batchReader interface {
	describe(ctx context.Context, tp topicPartition, offset int64) (batchDescription, error)
}

// describeTimeout bounds the direct read of one undecodable batch.
const describeTimeout = 10 * time.Second

// describeBatches makes the dead letter of each undecodable batch, its
// description read with a direct fetch. It holds no lock: landings do not
// wait for the broker's answer.
func (w *Worker) describeBatches(ctx context.Context, batches []undecodableBatch) []DeadLetter {
	letters := make([]DeadLetter, 0, len(batches))
	for _, b := range batches {
		d := DeadLetter{Reason: reasonUndecodableBatch, Topic: b.tp.topic, Partition: b.tp.partition,
			Offset: b.first, LastOffset: b.next - 1, Error: b.err.Error()}
		dctx, cancel := context.WithTimeout(ctx, describeTimeout)
		desc, err := w.batches.describe(dctx, b.tp, b.first)
		cancel()
		if err != nil {
			w.logger.Warn("reading an undecodable batch for its description failed; its dead letter has the client's error only",
				"topic", b.tp.topic, "partition", b.tp.partition, "offset", b.first, "err", err)
		} else {
			d.BatchBytes, d.Compression, d.Records = desc.bytes, desc.compression, desc.records
			d.Timestamp = desc.firstTimestamp.UTC().Format(time.RFC3339Nano)
			if desc.err != "" {
				d.Error = desc.err
			}
		}
		letters = append(letters, d)
	}
	return letters
}

// skipRangeLocked sends d, the dead letter of a batch, and moves p from
// first, where the client stands, to next, past the batch. The skipped
// offsets join p's window like dead-lettered records: they are committed
// with the window, after the dead letter is acknowledged. The caller holds
// w.landing (the name is older than that lock; stall.go calls it too).
func (w *Worker) skipRangeLocked(p *partitionState, d DeadLetter, first, next int64) {
	now := w.now()
	p.position = w.core.skipped(p.tp, first, next, now)
	w.sendBatchDeadLetter(p, d)
	w.metrics.deadLetters.WithLabelValues(p.tp.topic).Inc()
	w.metrics.undecodableBatches.WithLabelValues(p.tp.topic).Inc()
	w.logger.Error(d.Reason+" sent to the dead letters and skipped", "topic", p.tp.topic,
		"partition", p.tp.partition, "first_offset", first, "last_offset", next-1, "err", d.Error)
	p.progressAt = now
	w.seek(p.tp, p.position)
}

// kgoSeek moves the client's fetch position of tp. It is called from the
// poll loop before AllowRebalance, as SetOffsets asks for with
// BlockRebalanceOnPoll. The batch's leader epoch lies outside its CRC, so
// it is not trusted for the client's truncation check: epoch -1 skips it.
func kgoSeek(cl *kgo.Client) func(topicPartition, int64) {
	return func(tp topicPartition, offset int64) {
		cl.SetOffsets(map[string]map[int32]kgo.EpochOffset{tp.topic: {tp.partition: {Epoch: -1, Offset: offset}}})
	}
}

// kgoBatchReader reads a batch with a Fetch request of its own, sent to the
// partition's leader, and decompresses it with the worker's bounded
// decompressor to name the failure.
type kgoBatchReader struct {
	client       *kgo.Client
	decompressor kgo.Decompressor
}

// describeFetchBytes is what the direct read asks for: a batch larger than
// this still comes back whole from the first batch on (KIP-74); one cut
// short is described from its header only.
const describeFetchBytes = 1 << 20

func (r *kgoBatchReader) describe(ctx context.Context, tp topicPartition, offset int64) (batchDescription, error) {
	raw, err := r.fetch(ctx, tp, offset)
	if err != nil {
		return batchDescription{}, err
	}
	return describeBatch(raw, offset, r.decompressor)
}

// fetch returns the record batches of tp from the one holding offset on,
// read from the partition's leader with a Fetch request of its own.
func (r *kgoBatchReader) fetch(ctx context.Context, tp topicPartition, offset int64) ([]byte, error) {
	topics, err := kadm.NewClient(r.client).ListTopics(ctx, tp.topic)
	if err != nil {
		return nil, err
	}
	detail, ok := topics[tp.topic]
	if !ok || detail.Err != nil {
		return nil, fmt.Errorf("metadata of %s: %v", tp.topic, detail.Err)
	}
	part, ok := detail.Partitions[tp.partition]
	if !ok || part.Leader < 0 {
		return nil, fmt.Errorf("%s/%d has no leader", tp.topic, tp.partition)
	}
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 0, 1, describeFetchBytes
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = tp.topic, detail.ID // the name up to v12, the ID from v13
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = tp.partition, offset, describeFetchBytes
	rp.CurrentLeaderEpoch, rp.LogStartOffset = -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, r.client.Broker(int(part.Leader)))
	if err != nil {
		return nil, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, err
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.Partition != tp.partition {
				continue
			}
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return nil, err
			}
			return p.RecordBatches, nil
		}
	}
	return nil, fmt.Errorf("the fetch response has no %s/%d", tp.topic, tp.partition)
}

// The v2 batch header (Kafka's DefaultRecordBatch), by position:
//
//	 0 baseOffset int64
//	 8 batchLength int32: the bytes after this field
//	12 partitionLeaderEpoch int32
//	16 magic int8: 2
//	17 crc uint32: CRC-32C of everything from attributes on
//	21 attributes int16: the codec in the low 3 bits
//	23 lastOffsetDelta int32
//	27 baseTimestamp int64
//	35 maxTimestamp int64
//	43 producerId int64, 51 producerEpoch int16, 53 baseSequence int32
//	57 recordCount int32
//	61 the (compressed) records
const (
	batchLengthAt     = 8
	batchMagicAt      = 16
	batchAttributesAt = 21
	batchTimestampAt  = 27
	batchCountAt      = 57
	batchHeaderBytes  = 61
)

// describeBatch describes the first batch of raw, which must start at
// offset, and decompresses its records with d to say why they cannot be
// read. Only the header's fixed fields are read.
func describeBatch(raw []byte, offset int64, d kgo.Decompressor) (batchDescription, error) {
	if len(raw) < batchHeaderBytes {
		return batchDescription{}, fmt.Errorf("the fetch returned %d bytes, less than a batch header", len(raw))
	}
	if first := int64(binary.BigEndian.Uint64(raw)); first != offset {
		return batchDescription{}, fmt.Errorf("the fetch returned the batch at %d, not %d", first, offset)
	}
	if magic := raw[batchMagicAt]; magic != 2 {
		return batchDescription{}, fmt.Errorf("the batch at %d has magic %d, not 2", offset, magic)
	}
	length := int64(int32(binary.BigEndian.Uint32(raw[batchLengthAt:])))
	if length < batchHeaderBytes-12 {
		return batchDescription{}, fmt.Errorf("the batch at %d claims %d bytes, less than its header", offset, length)
	}
	codec := kgo.CompressionCodecType(binary.BigEndian.Uint16(raw[batchAttributesAt:]) & 0x07)
	desc := batchDescription{bytes: int(12 + length), compression: codecName(codec),
		records:        int32(binary.BigEndian.Uint32(raw[batchCountAt:])),
		firstTimestamp: time.UnixMilli(int64(binary.BigEndian.Uint64(raw[batchTimestampAt:])))}
	if int64(len(raw)) < 12+length {
		desc.err = fmt.Sprintf("not decompressed: the read returned %d of its %d bytes", len(raw), desc.bytes)
	} else if _, err := d.Decompress(raw[batchHeaderBytes:12+length], codec); err != nil {
		desc.err = err.Error()
	}
	return desc, nil
}

// codecName names a batch's compression codec as Kafka's compression.type
// does.
func codecName(c kgo.CompressionCodecType) string {
	switch c {
	case kgo.CodecNone:
		return "none"
	case kgo.CodecGzip:
		return "gzip"
	case kgo.CodecSnappy:
		return "snappy"
	case kgo.CodecLz4:
		return "lz4"
	case kgo.CodecZstd:
		return "zstd"
	}
	return fmt.Sprintf("unknown (%d)", int8(c))
}
