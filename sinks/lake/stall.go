package lake

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/internal/recordbatch"
)

// Stalled partitions.
//
// A batch that decompresses (or is uncompressed) but whose records are
// malformed, or that claims more records than it holds, stops franz-go
// without an error: it delivers the records before the first bad one, does
// not move past the batch (the rest might be a cut-short read), and, when
// no later batch came in the same fetch, strips the partition from every
// later fetch as making no progress. Nothing reaches the poll loop, so the
// undecodable-batch path (badbatch.go) never sees it. (When later batches
// come in the same fetch, franz-go moves on to their records by itself.)
//
// The worker notices such a partition by its silence: an owned partition
// that has delivered nothing for StallTimeout is checked. Its end offset is
// listed; when it is at the worker's position the partition is merely
// quiet and nothing else happens. Otherwise the batches at the position are
// read with a direct Fetch and given, as they are, to franz-go's own fetch
// processing (kgo.ProcessFetchPartition) from the position on. If franz-go
// delivers a record from them, the partition is slow, not stuck, and the
// worker waits. Only if franz-go would stop at a batch without an error AND
// the validator (internal/recordbatch, the rules a produced batch must pass
// at the broker) refuses that batch is it dead-lettered and skipped like
// an undecodable one, from the client's position to the batch's last
// offset. Timing decides only when a batch is looked at, never what is
// decided about it: both tests depend on the log's bytes alone, and the
// skipped offsets are ones franz-go never delivers (it stops decoding a
// batch at its first bad record), so the records landed are the same
// whether the sink skips the batch or franz-go passes it on its own.

// reasonMalformedBatch is the Reason of a dead letter that stands for a
// batch whose records are malformed.
const reasonMalformedBatch = "malformed batch"

// stallCheckTimeout bounds one round of stall checks (its listings and
// direct reads).
const stallCheckTimeout = 10 * time.Second

// stallProbe asks the brokers what a stall check needs; the kgo
// implementation is below, tests use fakes.
type stallProbe interface {
	// endOffsets returns the high watermark of every partition of topics.
	endOffsets(ctx context.Context, topics []string) (map[topicPartition]int64, error)
	// startOffsets returns where the client started each partition of
	// topics when it was assigned: the group's committed offset, else
	// where StartAt puts it.
	startOffsets(ctx context.Context, topics []string) (map[topicPartition]int64, error)
	// read returns the record batches of tp from the one holding offset
	// on, as a Fetch response carries them.
	read(ctx context.Context, tp topicPartition, offset int64) ([]byte, error)
}

// stallVerdict is what the batches at a position tell about a silent
// partition.
type stallVerdict int

const (
	stallNone      stallVerdict = iota // the client delivers records from here, or there is nothing to deliver
	stallValid                         // the client stops at a batch the validator accepts
	stallMalformed                     // the client stops at a batch the validator refuses: skip it
	stallUnknown                       // the read was cut short before the client would stop
)

// stuckBatch is the batch a silent partition stops at.
type stuckBatch struct {
	header   recordbatch.Header
	position int64 // the client's position, within or at the start of the batch
	err      error // why the validator refuses it
}

// findStuckBatch reads raw, the batches a Fetch of tp at position returned,
// as the client does, and returns where the client would stop. Control
// batches move the client's position without a record, so they are
// followed: the position the worker knows (after the last record it got)
// can lie behind them.
func findStuckBatch(raw []byte, tp topicPartition, position int64, d kgo.Decompressor) (stallVerdict, stuckBatch) {
	// The client stops at a batch only when nothing it can decode follows
	// in the same fetch (it moves on to a later batch's records), so the
	// whole batches read are processed together first.
	whole := 0
	for whole < len(raw) {
		h, err := recordbatch.ParseHeader(raw[whole:])
		if err != nil || h.Length < 0 || h.Size() > len(raw)-whole {
			break
		}
		whole += h.Size()
	}
	fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Topic: tp.topic, Partition: tp.partition,
		Offset: position}, &kmsg.FetchResponseTopicPartition{Partition: tp.partition, RecordBatches: raw[:whole]}, d, nil)
	if fp.Err != nil || len(fp.Records) > 0 {
		return stallNone, stuckBatch{}
	}
	for len(raw) > 0 {
		h, err := recordbatch.ParseHeader(raw)
		if err != nil || h.Length < 0 || h.Size() > len(raw) {
			// KIP-74: the first batch comes whole; what follows it may be cut.
			return stallUnknown, stuckBatch{}
		}
		batch := raw[:h.Size()]
		raw = raw[h.Size():]
		if h.LastOffset() < position {
			continue
		}
		fp, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Topic: tp.topic, Partition: tp.partition,
			Offset: position}, &kmsg.FetchResponseTopicPartition{Partition: tp.partition, RecordBatches: batch}, d, nil)
		switch {
		case fp.Err != nil:
			// Undecodable: the client reports it itself (badbatch.go).
			return stallNone, stuckBatch{}
		case len(fp.Records) > 0:
			return stallNone, stuckBatch{}
		case next > position:
			position = next // passed without a record (a transaction marker)
			continue
		}
		stuck := stuckBatch{header: h, position: position}
		// The batch's own size as max.message.bytes: size is not the
		// question here, and it keeps the decompression bound at the
		// broker's default. The check is rare (once per StallTimeout of a
		// partition's silence) and validates one batch, so it decodes
		// through a Decoder of its own, one batch at a time: the worker's
		// limits, shared with no broker in the same process.
		rules := &recordbatch.Rules{MaxDecompressed: max(recordbatch.DefaultMaxDecompressedBytes, int64(h.Size()))}
		if _, err := recordbatch.NewDecoder(1).Validate(batch, h.Size(), rules); err != nil {
			var be *recordbatch.Error
			if errors.As(err, &be) && !errors.Is(be.Err, recordbatch.ErrTooLarge) {
				stuck.err = fmt.Errorf("%w: %s", be.Err, be.Reason)
				return stallMalformed, stuck
			}
		}
		return stallValid, stuck
	}
	return stallNone, stuckBatch{}
}

// stallCheck is one silent partition whose check came due.
type stallCheck struct {
	p *partitionState
	// seen is p.position when the check came due (-1: nothing delivered
	// since the assignment); the verdict holds only while it is unchanged.
	seen int64
	// position is where the client stands, read from the broker when seen
	// is -1.
	position int64
	verdict  stallVerdict
	stuck    stuckBatch
}

// checkStalls checks every owned partition that has delivered nothing for
// StallTimeout, at most once per StallTimeout each. It holds w.landing to
// pick the partitions due and again to act on what it found, never while
// it asks the brokers: the listings and reads take up to stallCheckTimeout,
// and a landing, a rebalance callback or Shutdown need not wait for them.
// What was found is acted on only for a partition still assigned with its
// position unchanged since the check came due: one that delivered, was
// skipped or was revoked meanwhile is checked again when it falls silent.
func (w *Worker) checkStalls(ctx context.Context) {
	if w.probe == nil {
		return
	}
	w.landing.Lock()
	due := w.dueStallChecksLocked()
	w.landing.Unlock()
	if len(due) == 0 {
		return
	}
	found := w.probeStalls(ctx, due)
	w.landing.Lock()
	defer w.landing.Unlock()
	for _, c := range found {
		if w.partition(c.p.tp) != c.p || c.p.position != c.seen {
			continue
		}
		w.actOnStallLocked(c)
	}
}

// dueStallChecksLocked lists the partitions silent for StallTimeout since
// their last delivery or check, and marks them checked now. The caller
// holds w.landing.
func (w *Worker) dueStallChecksLocked() []stallCheck {
	now := w.now()
	var due []stallCheck
	for _, p := range w.sortedPartitionsLocked() {
		if now.Sub(p.progressAt) >= w.cfg.StallTimeout {
			p.progressAt = now
			due = append(due, stallCheck{p: p, seen: p.position, position: p.position})
		}
	}
	return due
}

// probeStalls asks the brokers about the due partitions, holding no lock
// (it reads only their topic-partitions and what dueStallChecksLocked
// copied), and returns those whose log goes on beyond the client's
// position, with the verdict on the batches there.
func (w *Worker) probeStalls(ctx context.Context, due []stallCheck) []stallCheck {
	topics := map[string]bool{}
	for _, c := range due {
		topics[c.p.tp.topic] = true
	}
	names := make([]string, 0, len(topics))
	for t := range topics {
		names = append(names, t)
	}
	ctx, cancel := context.WithTimeout(ctx, stallCheckTimeout)
	defer cancel()
	ends, err := w.probe.endOffsets(ctx, names)
	if err != nil {
		w.logger.Warn("listing end offsets for the stall check failed; checking again later", "err", err)
		return nil
	}
	var starts map[topicPartition]int64
	var found []stallCheck
	for _, c := range due {
		if c.position < 0 {
			// Nothing delivered since the assignment: the client is where
			// it started.
			if starts == nil {
				if starts, err = w.probe.startOffsets(ctx, names); err != nil {
					w.logger.Warn("fetching start offsets for the stall check failed; checking again later", "err", err)
					return found
				}
			}
			var ok bool
			if c.position, ok = starts[c.p.tp]; !ok {
				continue
			}
		}
		if end, ok := ends[c.p.tp]; !ok || end <= c.position {
			continue // quiet: nothing beyond the position
		}
		raw, err := w.probe.read(ctx, c.p.tp, c.position)
		if err != nil {
			w.logger.Warn("reading the batch at a silent partition's position failed; checking again later",
				"topic", c.p.tp.topic, "partition", c.p.tp.partition, "offset", c.position, "err", err)
			continue
		}
		c.verdict, c.stuck = findStuckBatch(raw, c.p.tp, c.position, w.decompressor)
		found = append(found, c)
	}
	return found
}

// actOnStallLocked skips the batch a silent partition is stuck at if that
// batch is malformed. The caller holds w.landing.
func (w *Worker) actOnStallLocked(c stallCheck) {
	p := c.p
	switch c.verdict {
	case stallMalformed:
		h := c.stuck.header
		d := DeadLetter{Reason: reasonMalformedBatch, Topic: p.tp.topic, Partition: p.tp.partition,
			Offset: c.stuck.position, LastOffset: h.LastOffset(), Error: c.stuck.err.Error(), BatchBytes: h.Size(),
			Compression: codecName(kgo.CompressionCodecType(h.Compression())), Records: h.Records,
			Timestamp: time.UnixMilli(h.FirstTimestamp).UTC().Format(time.RFC3339Nano)}
		w.skipRangeLocked(p, d, c.stuck.position, h.NextOffset())
	case stallValid, stallUnknown:
		if p.checkedAt != c.position {
			p.checkedAt = c.position
			w.logger.Debug("a silent partition's next batch is valid or could not be read whole; waiting for the client",
				"topic", p.tp.topic, "partition", p.tp.partition, "offset", c.position, "valid", c.verdict == stallValid)
		}
	}
}

// kgoStallProbe answers the stall check with the worker's client.
type kgoStallProbe struct {
	reader  *kgoBatchReader
	group   string
	startAt string // Config.StartAt
}

func (k *kgoStallProbe) endOffsets(ctx context.Context, topics []string) (map[topicPartition]int64, error) {
	listed, err := kadm.NewClient(k.reader.client).ListEndOffsets(ctx, topics...)
	return listedOffsets(listed, err)
}

func (k *kgoStallProbe) startOffsets(ctx context.Context, topics []string) (map[topicPartition]int64, error) {
	adm := kadm.NewClient(k.reader.client)
	committed, err := adm.FetchOffsetsForTopics(ctx, k.group, topics...)
	if err != nil {
		return nil, err
	}
	var out map[topicPartition]int64
	if k.startAt == "latest" {
		// Where the client started is the end offset at the assignment,
		// which has moved since; leaving such partitions out only means
		// they are checked from their first record on.
		out = map[topicPartition]int64{}
	} else if out, err = listedOffsets(adm.ListStartOffsets(ctx, topics...)); err != nil {
		return nil, err
	}
	committed.Each(func(o kadm.OffsetResponse) {
		if o.Err == nil && o.At >= 0 {
			out[topicPartition{o.Topic, o.Partition}] = o.At
		}
	})
	return out, nil
}

func (k *kgoStallProbe) read(ctx context.Context, tp topicPartition, offset int64) ([]byte, error) {
	return k.reader.fetch(ctx, tp, offset)
}

// listedOffsets turns kadm's listed offsets into a map, leaving out
// partitions whose listing failed.
func listedOffsets(listed kadm.ListedOffsets, err error) (map[topicPartition]int64, error) {
	if err != nil {
		return nil, err
	}
	out := map[topicPartition]int64{}
	listed.Each(func(o kadm.ListedOffset) {
		if o.Err == nil {
			out[topicPartition{o.Topic, o.Partition}] = o.Offset
		}
	})
	return out, nil
}
