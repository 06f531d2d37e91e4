package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// This file is consume's knowledge of the topic before it reads: that it
// exists (a missing topic is an error, not a silent wait), and for
// --exit-at-end where each partition ends and where reading starts.

// partitionsOf returns the topic's partitions, or an error that says the
// topic is missing or cannot be described.
func partitionsOf(ctx context.Context, adm *kadm.Client, topic string) ([]int32, error) {
	topics, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return nil, err
	}
	td, ok := topics[topic]
	switch {
	case !ok, errors.Is(td.Err, kerr.UnknownTopicOrPartition):
		return nil, fmt.Errorf("topic %s does not exist (millrace topic list shows the topics)", topic)
	case td.Err != nil:
		return nil, fmt.Errorf("topic %s: %w", topic, td.Err)
	}
	return td.Partitions.Numbers(), nil
}

// endTracker follows the consumer towards the end offsets every partition
// had when it started (kcat's -e): done once the next offset to read
// reaches the end on every partition.
type endTracker struct {
	ends map[int32]int64 // end offset (high watermark) at start
	next map[int32]int64 // next offset to read
}

// saw advances the partition past r. Control records count (a transaction's
// marker can be a partition's last offset), so the consumer keeps them and
// does not print them.
func (e *endTracker) saw(r *kgo.Record) {
	if r.Offset+1 > e.next[r.Partition] {
		e.next[r.Partition] = r.Offset + 1
	}
}

// done reports whether every partition was read to its end as of the start.
func (e *endTracker) done() bool {
	for p, end := range e.ends {
		if e.next[p] < end {
			return false
		}
	}
	return true
}

// newEndTracker reads the end offsets of the partitions consume reads and
// the offsets it starts from: --offset on its partition; else the group's
// committed offset where there is one; else the log start with
// --from-beginning and the end without. A committed offset outside the log
// is reset as the consumer resets it (to the log start with
// --from-beginning, else to the end); consume clamps --offset to the log
// start itself.
func newEndTracker(ctx context.Context, adm *kadm.Client, topic string, partitions []int32, o consumeOptions) (*endTracker, error) {
	starts, ends, err := logBounds(ctx, adm, topic)
	if err != nil {
		return nil, err
	}
	var committed kadm.OffsetResponses
	if o.group != "" {
		committed, err = adm.FetchOffsets(ctx, o.group)
		if err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
			return nil, fmt.Errorf("committed offsets of group %s: %w", o.group, err)
		}
	}
	e := &endTracker{ends: map[int32]int64{}, next: map[int32]int64{}}
	for _, p := range partitions {
		if o.offset >= 0 && p != int32(o.partition) {
			continue
		}
		start, end := starts[p], ends[p]
		reset := end
		if o.fromBeginning {
			reset = start
		}
		e.ends[p], e.next[p] = end, reset
		if c, ok := committed.Lookup(topic, p); ok && c.Err == nil && c.At >= 0 {
			e.next[p] = c.At
			if c.At < start || c.At > end {
				e.next[p] = reset
			}
		}
		if o.offset >= 0 {
			e.next[p] = max(o.offset, start)
		}
	}
	return e, nil
}

// logBounds returns the log start and end offsets of the topic's partitions.
func logBounds(ctx context.Context, adm *kadm.Client, topic string) (starts, ends map[int32]int64, err error) {
	read := func(list func(context.Context, ...string) (kadm.ListedOffsets, error), what string) (map[int32]int64, error) {
		listed, err := list(ctx, topic)
		if err == nil {
			err = listed.Error()
		}
		if err != nil {
			return nil, fmt.Errorf("%s offsets of %s: %w", what, topic, err)
		}
		out := map[int32]int64{}
		listed.Each(func(l kadm.ListedOffset) { out[l.Partition] = l.Offset })
		return out, nil
	}
	if starts, err = read(adm.ListStartOffsets, "start"); err != nil {
		return nil, nil, err
	}
	ends, err = read(adm.ListEndOffsets, "end")
	return starts, ends, err
}
