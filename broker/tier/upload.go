package tier

// Upload. The leader copies each closed segment that lies wholly below the
// high watermark (so no leader change can truncate it) and the last stable
// offset (so its transactions are decided) and ends past the
// remote state's End: its .log (exactly the segment's valid bytes), .index,
// .timeindex and .txnindex, and the partition's producer state snapshot,
// each under Key+suffix. Only when every object is published does the
// state record the segment; then the log learns its new RemoteEnd and
// local retention may delete the segment.
//
// Overlaps: a new leader continues after the highest remote offset, but
// its segment boundaries are its own, so its first segment past End may
// start below End. It is uploaded whole, as Kafka uploads such a
// straddling segment; the state then holds overlapping ranges and a reader
// picks by offset (state.go).
//
// Repeats: the key names the offset range, so a leader that re-uploads a
// range whose objects exist but were never recorded (its predecessor
// crashed between publishing and recording) gets store.ErrExists. The
// existing .log object is checked to have the local segment's size; the
// other objects are derived per replica (index entries depend on how
// batches arrived) and are kept as they are.
//
// The producer snapshot is the partition's producer-state.snapshot as it
// is on disk when the segment is uploaded: the state as of the offset in
// its header (broker/log/producer_snapshot.go), which may lie after the
// segment's end. The log keeps one snapshot, not one per segment as Kafka
// does; an empty object means the partition had none yet.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"millrace/broker/log"
	"millrace/store"
)

// Each object's upload has a deadline: a store that stops answering (a
// stopped server, a connection the network drops silently) would
// otherwise hold the request until the S3 client's own limits, a minute
// per try and several tries, and with it the broker's whole round: every
// partition's uploads and retention, and the remote end its followers
// learn. An object gets uploadTimeoutBase plus the time to send it at
// uploadMinRate; a slower store fails the attempt, which is counted
// (millrace_tier_upload_errors_total) and tried again next round, and
// nothing is recorded, so local retention keeps the segment meanwhile.
const (
	uploadTimeoutBase = 10 * time.Second
	uploadMinRate     = 1 << 20 // bytes per second
)

// uploadTimeout is the deadline of one object's upload of size bytes.
func (m *Manager) uploadTimeout(size int64) time.Duration {
	rate := min(uploadMinRate, m.cfg.copyRate())
	return m.uploadTimeoutBase + time.Duration(float64(size)/rate*float64(time.Second))
}

// producerSnapshotFile is the producer state snapshot's name in a
// partition directory (broker/log/producer_snapshot.go).
const producerSnapshotFile = "producer-state.snapshot"

// upload copies every uploadable segment, oldest first, stopping at the
// first failure.
func (m *Manager) upload(ctx context.Context, w *writer, logger *slog.Logger) error {
	p := w.p
	bound := p.HighWatermark
	if bound < 0 {
		bound = p.Log.EndOffset()
	}
	// Below the last stable offset too, as Kafka's RemoteLogManager: a
	// segment holding part of an undecided transaction waits for its
	// marker, so the aborted transactions it lists are final.
	firstUnstable, ongoing, err := p.Log.FirstUnstableOffset()
	if err != nil {
		return fmt.Errorf("tier: loading the transaction state of %s-%d: %w", p.Topic, p.Partition, err)
	}
	if ongoing {
		bound = min(bound, firstUnstable)
	}
	segments := p.Log.Segments()
	for _, s := range segments[:len(segments)-1] { // the last is active
		if s.NextOffset <= w.state.End() || s.NextOffset == s.BaseOffset {
			continue
		}
		if s.NextOffset > bound {
			break
		}
		if err := m.uploadSegment(ctx, w, s); err != nil {
			m.metrics.uploadErrors.Inc()
			return err
		}
		logger.Debug("segment uploaded", "base_offset", s.BaseOffset, "last_offset", s.NextOffset-1, "bytes", s.Size)
	}
	return nil
}

// uploadSegment stores one segment's objects and records it.
func (m *Manager) uploadSegment(ctx context.Context, w *writer, s log.SegmentInfo) error {
	p := w.p
	seg := Segment{BaseOffset: s.BaseOffset, LastOffset: s.NextOffset - 1, LeaderEpoch: p.LeaderEpoch,
		MaxTimestamp: s.MaxTimestamp, Size: s.Size, Key: SegmentKey(p.Topic, w.topicID, p.Partition, s.BaseOffset, s.NextOffset-1)}
	dir := p.Log.Dir()
	var uploaded int64
	for _, suffix := range suffixes {
		path := filepath.Join(dir, segmentFileName(s.BaseOffset, suffix))
		limit := int64(-1)
		switch suffix {
		case LogSuffix:
			limit = s.Size
		case SnapshotSuffix:
			path = filepath.Join(dir, producerSnapshotFile)
		}
		n, err := m.putFile(ctx, seg.Key+suffix, path, limit, suffix != LogSuffix)
		if err != nil {
			return err
		}
		uploaded += n
	}
	next := w.state
	next.Segments = append(append([]Segment(nil), w.state.Segments...), seg)
	if len(w.state.Segments) == 0 {
		// The first segment of a partition whose older records were never
		// tiered (remote storage enabled on a topic with history).
		next.LogStartOffset = max(next.LogStartOffset, seg.BaseOffset)
	}
	if err := m.commit(w, next); err != nil {
		return err
	}
	m.metrics.uploadedBytes.Add(float64(uploaded))
	m.metrics.uploadedSegments.Inc()
	return nil
}

// putFile stores the local file at path (its first limit bytes, or all of
// it when limit is negative) as the object name and returns the bytes
// stored. A missing file is an empty object when mayBeMissing. An object
// of that name already stored is kept when its size matches, or whatever
// its size for a file other than the .log (see the file's header).
func (m *Manager) putFile(ctx context.Context, name, path string, limit int64, mayBeMissing bool) (int64, error) {
	var r io.Reader = strings.NewReader("")
	var size int64
	f, err := os.Open(path)
	switch {
	case err == nil:
		defer f.Close()
		r, size = f, limit
		if limit >= 0 {
			r = io.LimitReader(f, limit)
		} else if info, err := f.Stat(); err == nil {
			size = info.Size()
		}
	case errors.Is(err, fs.ErrNotExist) && mayBeMissing:
	default:
		// A segment deleted since it was listed (DeleteRecords, a
		// truncation) is not uploaded; the next round sees it gone.
		return 0, fmt.Errorf("tier: reading %s for upload: %w", path, err)
	}
	timeout := m.uploadTimeout(size)
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if m.copyThrottle != nil {
		// The store sends the object's bytes at the copy quota's pace.
		tctx = store.WithPacer(tctx, m.copyThrottle)
	}
	obj, err := m.store.Create(tctx, name)
	if err != nil {
		return 0, fmt.Errorf("tier: uploading %s: %w", name, err)
	}
	defer obj.Abort(ctx)
	n, err := io.Copy(obj, r)
	if err != nil {
		return 0, fmt.Errorf("tier: uploading %s from %s: %w", name, path, err)
	}
	if limit >= 0 && n != limit {
		return 0, fmt.Errorf("tier: uploading %s: %s holds %d bytes, the segment %d", name, path, n, limit)
	}
	err = obj.Publish(tctx)
	existed := errors.Is(err, store.ErrExists)
	if existed {
		// Stored by an earlier upload: not counted as uploaded again.
		err = m.checkExisting(tctx, name, n, limit >= 0)
	} else if err != nil {
		err = fmt.Errorf("tier: publishing %s: %w", name, err)
	}
	if err != nil && ctx.Err() == nil && tctx.Err() != nil {
		return 0, fmt.Errorf("tier: the remote store did not take %s (%d bytes) within %v; retrying next round: %w", name, n, timeout, err)
	}
	if err != nil || existed {
		return 0, err
	}
	return n, nil
}

// checkExisting accepts an object a previous upload of the same range
// stored: one of the expected size, or any for a per-replica object.
func (m *Manager) checkExisting(ctx context.Context, name string, size int64, exact bool) error {
	if !exact {
		return nil
	}
	r, err := m.store.Open(ctx, name)
	if err != nil {
		return fmt.Errorf("tier: checking the existing object %s: %w", name, err)
	}
	defer r.Close()
	if r.Size() != size {
		return fmt.Errorf("tier: %s already exists with %d bytes where this segment has %d; remove it if no remote state references it", name, r.Size(), size)
	}
	return nil
}

// segmentFileName is the name of a segment's file in its partition
// directory (broker/log's "<20-digit base offset><suffix>").
func segmentFileName(base int64, suffix string) string {
	return fmt.Sprintf("%0*d%s", offsetDigits, base, suffix)
}
