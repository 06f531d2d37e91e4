package lake

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/store"
)

// encodeWatermark is the commit metadata of a window: its largest record
// timestamp, in Unix milliseconds.
func encodeWatermark(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return fmt.Sprintf(`{"wm":%d}`, t.UnixMilli())
}

// WatermarkTime reads a window's watermark as the sink commits it, in the
// group offset's metadata or a table's snapshot summary: the largest
// record time landed. The audit judges a table's hours complete by it.
func WatermarkTime(s string) (time.Time, bool) { return decodeWatermark(s) }

// decodeWatermark reads encodeWatermark's output.
func decodeWatermark(s string) (time.Time, bool) {
	var v struct {
		WM *int64 `json:"wm"`
	}
	if err := json.Unmarshal([]byte(s), &v); err != nil || v.WM == nil {
		return time.Time{}, false
	}
	return time.UnixMilli(*v.WM).UTC(), true
}

// progressSource tells how far the whole group has landed each topic.
type progressSource interface {
	// positions returns, per topic, the smallest position over its
	// partitions; a topic missing from the map has a partition whose
	// position is unknown.
	positions(ctx context.Context, topics []string, now time.Time) (map[string]time.Time, error)
}

// kgoProgress reads the group's committed offsets (with their watermark
// metadata) and the partitions' end offsets.
type kgoProgress struct {
	client *kgo.Client
	group  string
}

func (k *kgoProgress) positions(ctx context.Context, topics []string, now time.Time) (map[string]time.Time, error) {
	adm := kadm.NewClient(k.client)
	committed, err := adm.FetchOffsetsForTopics(ctx, k.group, topics...)
	if err != nil {
		return nil, err
	}
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return nil, err
	}
	out := map[string]time.Time{}
	for _, topic := range topics {
		pos, known := time.Time{}, true
		partitions := 0
		ends.Each(func(e kadm.ListedOffset) {
			if e.Topic != topic {
				return
			}
			partitions++
			t, ok := partitionPosition(e, committed, now)
			if !ok {
				known = false
				return
			}
			if pos.IsZero() || t.Before(pos) {
				pos = t
			}
		})
		if known && partitions > 0 {
			out[topic] = pos
		}
	}
	return out, nil
}

// partitionPosition is a partition's position in record time: now when the
// group has consumed everything in it (any later record is newer), else the
// watermark of its committed offset.
func partitionPosition(end kadm.ListedOffset, committed kadm.OffsetResponses, now time.Time) (time.Time, bool) {
	if end.Err != nil {
		return time.Time{}, false
	}
	c, ok := committed.Lookup(end.Topic, end.Partition)
	if end.Offset == 0 || (ok && c.Err == nil && c.At >= end.Offset) {
		return now, true
	}
	if !ok || c.Err != nil || c.At < 0 {
		return time.Time{}, false
	}
	return decodeWatermark(c.Metadata)
}

// addPendingLocked remembers that bucket of topic has files and may need a
// marker. The caller holds w.mu.
func (w *Worker) addPendingLocked(topic string, bucket time.Time) {
	if w.cfg.SuccessGrace < 0 {
		return
	}
	m := w.pending[topic]
	if m == nil {
		m = map[int64]struct{}{}
		w.pending[topic] = m
	}
	m[bucket.Unix()] = struct{}{}
}

// recoverPending adds to the pending set the buckets of topic near the
// group's position that have files but no _SUCCESS marker. The worker that
// landed them may have stopped before their markers were due, and no later
// window names them again, so without this their markers would never come.
// It lists the days from a day (plus the grace) before the position to a day
// after it: further back, markers were due long before the stop. It reads
// the group's progress and lists the lake holding no lock.
func (w *Worker) recoverPending(ctx context.Context, topic string) {
	if w.cfg.SuccessGrace < 0 || w.progress == nil {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	pos, err := w.progress.positions(cctx, []string{topic}, w.now())
	if err != nil {
		w.logger.Warn("reading the group's progress to recover due _SUCCESS markers failed", "topic", topic, "err", err)
		return
	}
	p, ok := pos[topic]
	if !ok {
		return // some partition has no position yet: nothing was landed before
	}
	var due []time.Time
	defer func() {
		w.mu.Lock()
		for _, b := range due {
			w.addPendingLocked(topic, b)
		}
		w.mu.Unlock()
	}()
	const day = 24 * time.Hour
	for d := p.Add(-day - w.cfg.SuccessGrace).UTC().Truncate(day); !d.After(p.Add(day)); d = d.Add(day) {
		objs, err := w.store.List(cctx, DayPrefix(topic, d))
		if err != nil {
			w.logger.Warn("listing the lake to recover due _SUCCESS markers failed", "topic", topic, "err", err)
			return
		}
		files, marked := map[string]bool{}, map[string]bool{}
		for _, o := range objs {
			dir, base := path.Split(o.Name)
			if base == SuccessName {
				marked[dir] = true
			} else if strings.HasSuffix(base, ".parquet") {
				files[dir] = true
			}
		}
		for dir := range files {
			if b, ok := w.layout.ParseDir(topic, strings.TrimSuffix(dir, "/")); ok && !marked[dir] {
				due = append(due, b)
			}
		}
	}
}

// maybeWriteMarkers writes the _SUCCESS markers that are due, at most once
// per SuccessInterval. It reads the group's progress and writes the
// markers holding no lock; w.mu only guards the pending set.
func (w *Worker) maybeWriteMarkers(ctx context.Context) {
	now := w.now()
	w.mu.Lock()
	if len(w.pending) == 0 || w.progress == nil || now.Sub(w.lastSuccessCheck) < w.cfg.SuccessInterval {
		w.mu.Unlock()
		return
	}
	w.lastSuccessCheck = now
	pending := make(map[string][]int64, len(w.pending))
	for t, buckets := range w.pending {
		for b := range buckets {
			pending[t] = append(pending[t], b)
		}
	}
	w.mu.Unlock()
	topics := make([]string, 0, len(pending))
	for t := range pending {
		topics = append(topics, t)
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	pos, err := w.progress.positions(cctx, topics, now)
	if err != nil {
		w.logger.Warn("reading the group's progress for _SUCCESS markers failed", "err", err)
		return
	}
	written := map[string][]int64{}
	for topic, buckets := range pending {
		p, ok := pos[topic]
		if !ok {
			continue
		}
		for _, b := range buckets {
			bucket := time.Unix(b, 0).UTC()
			if bucket.Add(w.layout.BucketSize() + w.cfg.SuccessGrace).After(p) {
				continue
			}
			name := w.layout.SuccessFile(topic, bucket)
			if err := w.writeMarker(cctx, name); err != nil {
				w.logger.Warn("writing a _SUCCESS marker failed; retried later", "name", name, "err", err)
				continue
			}
			written[topic] = append(written[topic], b)
			w.metrics.markers.WithLabelValues(topic).Inc()
			w.logger.Info("bucket complete", "name", name)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for topic, buckets := range written {
		for _, b := range buckets {
			delete(w.pending[topic], b)
		}
		if len(w.pending[topic]) == 0 {
			delete(w.pending, topic)
		}
	}
}

// writeMarker publishes an empty marker; one that exists (another worker,
// or an earlier life of this one, wrote it) is as good.
func (w *Worker) writeMarker(ctx context.Context, name string) error {
	obj, err := w.store.Create(ctx, name)
	if err != nil {
		return err
	}
	defer obj.Abort(ctx)
	if err := obj.Publish(ctx); err != nil && !errors.Is(err, store.ErrExists) {
		return err
	}
	return nil
}
