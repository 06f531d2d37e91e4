package lake

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/schemas"
	"millrace/schemas/otel"
)

// The rebuild of a partition's dedup set on assignment (doc.go, "Dedup"):
// the records of the last DedupWindow before the committed offset are read
// again from the broker and decided without landing anything.

// partition then starts with an empty state).
type dedupHistory interface {
	// committed returns the group's committed offset of tp and the
	// record-time watermark of its metadata (zero when it has none); ok is
	// false when nothing is committed.
	committed(ctx context.Context, tp topicPartition) (offset int64, watermark time.Time, ok bool, err error)
	// replay calls fn with the records of tp from the first whose record
	// timestamp is at or after since, up to (not including) offset before,
	// as the group's client delivers them.
	replay(ctx context.Context, tp topicPartition, since time.Time, before int64, fn func(*kgo.Record)) error
}

// rebuildTimeout bounds the rebuilding of one partition's state.
const rebuildTimeout = 2 * time.Minute

// rebuildDedups gives every partition of fetches that has records but no
// dedup state yet its state as of its first record, by replay
// (rebuildDedup). It runs before the records are handed to the lander and
// holds w.landing only to look and to set: a replay takes up to
// rebuildTimeout, and a revoke's landing must not wait for it. No
// rebalance callback runs meanwhile (they run between polls), so the
// partitions stay assigned.
func (w *Worker) rebuildDedups(ctx context.Context, fetches kgo.Fetches) {
	if w.cfg.Dedup != "on" {
		return
	}
	fetches.EachPartition(func(ftp kgo.FetchTopicPartition) {
		if len(ftp.Records) == 0 {
			// Nothing to decide; and a poll that timed out reports its
			// error under an empty topic name, which is no partition.
			return
		}
		tp := topicPartition{ftp.Topic, ftp.Partition}
		w.landing.Lock()
		p := w.assign(tp)
		first, ok := p.firstUndecided(ftp.Records)
		ok = ok && p.dedup == nil
		w.landing.Unlock()
		if !ok {
			return
		}
		d := w.rebuildDedup(ctx, tp, first)
		w.landing.Lock()
		if w.partition(tp) == p && p.dedup == nil {
			p.dedup = d
		}
		w.landing.Unlock()
	})
}

// firstUndecided is the offset of the first of records the lander will
// decide: the first past p's open window (an earlier one is a re-delivery).
// The caller holds w.landing.
func (p *partitionState) firstUndecided(records []*kgo.Record) (int64, bool) {
	for _, r := range records {
		if p.win == nil || r.Offset >= p.win.next {
			return r.Offset, true
		}
	}
	return 0, false
}

// rebuildDedup returns the dedup state of tp as it was before the record
// at offset first, the first one the group delivered after the
// assignment: the records of the last DedupWindow before it are read again
// and decided without landing anything. The window's last record time is at
// most the partition clock there, so everything older than it minus the
// window is forgotten by every worker already (doc.go, "Dedup"). It holds no
// lock.
func (w *Worker) rebuildDedup(ctx context.Context, tp topicPartition, first int64) *deduper {
	d := newDeduper(w.cfg.DedupWindow, w.cfg.DedupMaxIDs)
	d.idField = w.cfg.eventIDField()
	if w.history == nil || first == 0 {
		return d
	}
	logger := w.logger.With("topic", tp.topic, "partition", tp.partition)
	ctx, cancel := context.WithTimeout(ctx, rebuildTimeout)
	defer cancel()
	offset, watermark, ok, err := w.history.committed(ctx, tp)
	switch {
	case err != nil:
		logger.Warn("dedup: cannot read the committed offset; repeats of records before it are not recognised", "err", err)
		return d
	case !ok || offset != first:
		// Nothing committed: the partition starts where StartAt puts it,
		// with nothing remembered, for every worker alike.
		return d
	case watermark.IsZero():
		logger.Warn("dedup: the committed offset carries no record time; repeats of records before it are not recognised", "offset", offset)
		return d
	}
	row := w.schema.NewRow()
	var rows *otel.Rows // an OTLP schema's records hold several rows (rows.go)
	if schemas.IsOTLP(w.schema) {
		rows, _ = otel.New(w.schema)
	}
	read := 0
	err = w.history.replay(ctx, tp, watermark.Add(-w.cfg.DedupWindow+time.Millisecond), first, func(r *kgo.Record) {
		read++
		d.observe(r.Timestamp)
		if rows != nil {
			replayRows(d, rows, row, r)
			return
		}
		if w.registry != nil {
			d.decide(w.registryEventID(r))
			return
		}
		if len(r.Value) == 0 || row.Decode(r.Value) != nil {
			return // dead-lettered: it has no id
		}
		d.decide(rowEventID(row, r.Value, d.idField))
	})
	w.metrics.dedupRebuilt.WithLabelValues(tp.topic).Add(float64(read))
	if err != nil {
		logger.Warn("dedup: rebuilding the remembered ids failed part way; some repeats may be landed", "records_read", read, "err", err)
		return d
	}
	logger.Info("dedup: rebuilt the remembered ids", "records_read", read, "ids", d.n, "before", first)
	return d
}

// kgoHistory reads the committed offsets with the group's client, and
// replays with direct Fetch requests given to franz-go's own fetch
// processing, so the replay sees exactly the records the group's client
// delivered, past transaction markers, and skips the batches the worker
// skipped (badbatch.go, stall.go) the same way.
type kgoHistory struct {
	client       *kgo.Client
	group        string
	reader       *kgoBatchReader
	decompressor kgo.Decompressor // the worker's bounded one
}

func (h *kgoHistory) committed(ctx context.Context, tp topicPartition) (int64, time.Time, bool, error) {
	offsets, err := kadm.NewClient(h.client).FetchOffsetsForTopics(ctx, h.group, tp.topic)
	if err != nil {
		return 0, time.Time{}, false, err
	}
	o, ok := offsets.Lookup(tp.topic, tp.partition)
	if !ok || o.Err != nil || o.At < 0 {
		if ok && o.Err != nil {
			return 0, time.Time{}, false, o.Err
		}
		return 0, time.Time{}, false, nil
	}
	wm, _ := decodeWatermark(o.Metadata)
	return o.At, wm, true, nil
}

func (h *kgoHistory) replay(ctx context.Context, tp topicPartition, since time.Time, before int64, fn func(*kgo.Record)) error {
	listed, err := kadm.NewClient(h.client).ListOffsetsAfterMilli(ctx, since.UnixMilli(), tp.topic)
	if err != nil {
		return err
	}
	start, ok := listed.Lookup(tp.topic, tp.partition)
	if !ok || start.Err != nil {
		return fmt.Errorf("listing the offset of %s: %v", since.Format(time.RFC3339Nano), start.Err)
	}
	decompressor := stoppingDecompressor{h.decompressor}
	for position := start.Offset; position >= 0 && position < before; {
		raw, err := h.reader.fetch(ctx, tp, position)
		if err != nil {
			return err
		}
		fp, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Topic: tp.topic, Partition: tp.partition,
			Offset: position}, &kmsg.FetchResponseTopicPartition{Partition: tp.partition, RecordBatches: raw}, decompressor, nil)
		for _, r := range fp.Records {
			if r.Offset >= position && r.Offset < before {
				fn(r)
			}
		}
		if tooLarge, ok := errors.AsType[*kgo.ErrDecompressTooLarge](fp.Err); ok {
			next = tooLarge.NextOffset // skipped by the group's client too
		} else if fp.Err != nil {
			return fp.Err
		}
		if next <= position {
			verdict, stuck := findStuckBatch(raw, tp, position, h.decompressor)
			if verdict != stallMalformed {
				return fmt.Errorf("no record past offset %d", position)
			}
			next = stuck.header.NextOffset() // skipped by the worker too (stall.go)
		}
		position = next
	}
	return nil
}
