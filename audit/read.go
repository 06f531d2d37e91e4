package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// SinkRecord is the value a sink publishes: a Record plus Offset, the
// partition offset after the last record the counts include (the offset the
// sink commits right after publishing it). A sink's counts are a function of
// its partition's records below Offset only, so two records of one key with
// the same Offset are equal, and the one with the larger Offset is the
// newer count, whoever published it (a worker that crashed before its
// commit, a replacement, or a zombie that publishes late).
type SinkRecord struct {
	Record
	Offset int64 `json:"offset"`
}

// Marshal encodes the record's value as JSON, Offset included.
func (s *SinkRecord) Marshal() ([]byte, error) { return json.Marshal(s) }

// Entry is one audit record read back from the topic, with where it was in
// the log (later entries of a key win).
type Entry struct {
	Record
	// SinkOffset is a sink record's Offset, -1 for agents.
	SinkOffset int64
	Partition  int32
	LogOffset  int64
}

// Log is what Read found on the audit topic.
type Log struct {
	// Entries are the count records, in log order per partition.
	Entries []Entry
	// Runs are the runs of publishers, the last record of each, sorted by
	// key.
	Runs []Run
	// Skipped counts malformed records.
	Skipped int
}

// Read reads the audit topic from its start to its end offsets as they
// were when Read began, decoding every record; malformed records are counted
// in Log.Skipped, not returned. A topic that does not exist yet reads as
// empty. cl must not consume anything else (Read assigns it the audit
// partitions).
func Read(ctx context.Context, cl *kgo.Client, topic string) (*Log, error) {
	entries, runs, skipped, err := read(ctx, cl, topic)
	if err != nil {
		return nil, err
	}
	l := &Log{Entries: entries, Skipped: skipped}
	for _, k := range slices.Sorted(maps.Keys(runs)) {
		l.Runs = append(l.Runs, runs[k])
	}
	return l, nil
}

func read(ctx context.Context, cl *kgo.Client, topic string) (entries []Entry, runs map[string]Run, skipped int, err error) {
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("audit: end offsets of %s: %w", topic, err)
	}
	want := map[int32]int64{}
	start := map[string]map[int32]kgo.Offset{topic: {}}
	var listErr error
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			if !errors.Is(o.Err, kerr.UnknownTopicOrPartition) {
				listErr = o.Err
			}
			return
		}
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
			start[topic][o.Partition] = kgo.NewOffset().AtStart()
		}
	})
	if listErr != nil {
		return nil, nil, 0, fmt.Errorf("audit: end offsets of %s: %w", topic, listErr)
	}
	runs = map[string]Run{}
	if len(want) == 0 {
		return nil, runs, 0, nil
	}
	cl.AddConsumePartitions(start)
	defer cl.RemoveConsumePartitions(map[string][]int32{topic: keys(want)})
	for len(want) > 0 {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, nil, 0, fmt.Errorf("audit: reading %s: %w", topic, err)
		}
		var fetchErr error
		fetches.EachError(func(_ string, _ int32, err error) { fetchErr = err })
		if fetchErr != nil {
			return nil, nil, 0, fmt.Errorf("audit: reading %s: %w", topic, fetchErr)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			end, ok := want[r.Partition]
			if !ok || r.Offset >= end {
				return
			}
			if r.Offset == end-1 {
				delete(want, r.Partition)
			}
			if run, ok, err := decodeRun(r.Value); ok {
				if err != nil {
					skipped++
				} else {
					runs[run.Key()] = run
				}
				return
			}
			e, err := decodeEntry(r.Value)
			if err != nil {
				skipped++
				return
			}
			e.Partition, e.LogOffset = r.Partition, r.Offset
			entries = append(entries, e)
		})
	}
	return entries, runs, skipped, nil
}

// decodeRun decodes value when it is a Run (ok), and checks it.
func decodeRun(value []byte) (r Run, ok bool, err error) {
	var kind struct {
		Kind string `json:"kind"`
	}
	if json.Unmarshal(value, &kind) != nil || kind.Kind != KindRun {
		return Run{}, false, nil
	}
	if err := json.Unmarshal(value, &r); err != nil {
		return Run{}, true, fmt.Errorf("audit: run record: %w", err)
	}
	return r, true, r.Validate()
}

// decodeEntry decodes a record value of either role.
func decodeEntry(value []byte) (Entry, error) {
	r, err := ParseRecord(value)
	if err != nil {
		return Entry{}, err
	}
	e := Entry{Record: r, SinkOffset: -1}
	if r.Role == RoleSink {
		var s struct {
			Offset *int64 `json:"offset"`
		}
		if err := json.Unmarshal(value, &s); err != nil || s.Offset == nil || *s.Offset < 0 {
			return Entry{}, errors.New("audit: sink record without an offset")
		}
		e.SinkOffset = *s.Offset
	}
	return e, nil
}

func keys(m map[int32]int64) []int32 {
	out := make([]int32, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// Latest keeps one entry per key: for agents the last in the log, for
// sinks the one with the largest Offset (the last in the log among equals).
// Entries must be in log order per partition, as Read returns them; a key
// always maps to one partition.
func Latest(entries []Entry) map[string]Entry {
	out := make(map[string]Entry, len(entries))
	for _, e := range entries {
		k := e.Key()
		if old, ok := out[k]; ok && e.Role == RoleSink && e.SinkOffset < old.SinkOffset {
			continue
		}
		out[k] = e
	}
	return out
}
