package registry

import (
	"context"
	"slices"
	"sync"
)

// MemoryLog is a Log held in memory, for tests and for a single process
// that needs no durability (the registry of `millrace up` on one machine
// without a broker, say). Appending through the MemoryLog itself never
// fences; Writer hands out appenders that do, as a Kafka producer's epoch
// fences its predecessors.
type MemoryLog struct {
	mu         sync.Mutex // guards the following
	records    []Record
	generation int64         // of the newest Writer; older writers are fenced
	grown      chan struct{} // closed and replaced when records grow
}

// NewMemoryLog returns an empty log.
func NewMemoryLog() *MemoryLog {
	return &MemoryLog{grown: make(chan struct{})}
}

// Read implements Log.
func (m *MemoryLog) Read(ctx context.Context, from int64) ([]Record, error) {
	for {
		m.mu.Lock()
		if from < int64(len(m.records)) {
			out := slices.Clone(m.records[max(from, 0):])
			m.mu.Unlock()
			return out, nil
		}
		grown := m.grown
		m.mu.Unlock()
		select {
		case <-grown:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// End implements Log.
func (m *MemoryLog) End(context.Context) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return int64(len(m.records)), nil
}

// Append implements Log without fencing.
func (m *MemoryLog) Append(_ context.Context, records []Record) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.appendLocked(records), nil
}

func (m *MemoryLog) appendLocked(records []Record) int64 {
	for _, r := range records {
		r.Offset = int64(len(m.records))
		r.Key, r.Value = slices.Clone(r.Key), slices.Clone(r.Value)
		m.records = append(m.records, r)
	}
	close(m.grown)
	m.grown = make(chan struct{})
	return int64(len(m.records)) - 1
}

// Writer returns a Log whose appends succeed until Writer is called again:
// from then on they fail with ErrFenced. Reads go to the same records.
func (m *MemoryLog) Writer() Log {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.generation++
	return &fencedWriter{log: m, generation: m.generation}
}

// fencedWriter is one generation's handle on a MemoryLog.
type fencedWriter struct {
	log        *MemoryLog
	generation int64
}

func (w *fencedWriter) Read(ctx context.Context, from int64) ([]Record, error) {
	return w.log.Read(ctx, from)
}

func (w *fencedWriter) End(ctx context.Context) (int64, error) { return w.log.End(ctx) }

func (w *fencedWriter) Append(_ context.Context, records []Record) (int64, error) {
	w.log.mu.Lock()
	defer w.log.mu.Unlock()
	if w.generation != w.log.generation {
		return 0, ErrFenced
	}
	return w.log.appendLocked(records), nil
}
