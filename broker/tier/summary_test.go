package tier

import (
	"context"
	"testing"
)

// TestRemoteSummary: after a round, leader and follower alike report the
// partition's remote start, end and size as the state holds them; a
// partition with nothing uploaded, or no longer hosted, reports none. The
// summary survives its DescribeLogDirs encoding, and a field of another
// length is refused rather than misread.
func TestRemoteSummary(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := leader(openTieredLog(t, 2, 3), 1) // [0,1] [2,4] and the active [5]
	hosted := []Partition{p}
	m := e.manager(nil)
	m.host.Partitions = func() []Partition { return hosted }
	if _, ok := m.Remote("t", 0); ok {
		t.Fatal("a summary before any round")
	}
	m.RunOnce(context.Background())
	st := e.state()
	want := Remote{LogStartOffset: 0, EndOffset: 5, Size: st.Size()}
	if got, ok := m.Remote("t", 0); !ok || got != want || want.Size <= 0 {
		t.Fatalf("leader's summary %+v (%v), want %+v", got, ok, want)
	}

	follower := leader(openTieredLog(t, 1), 1)
	follower.Leader = false
	f := e.manager(nil, follower)
	f.RunOnce(context.Background())
	if got, ok := f.Remote("t", 0); !ok || got != want {
		t.Fatalf("follower's summary %+v (%v), want %+v", got, ok, want)
	}

	hosted = nil
	m.RunOnce(context.Background())
	if got, ok := m.Remote("t", 0); ok {
		t.Fatalf("summary %+v of a partition no longer hosted", got)
	}

	if got, err := DecodeRemote(want.Encode()); err != nil || got != want {
		t.Fatalf("round trip %+v (%v), want %+v", got, err, want)
	}
	if _, err := DecodeRemote(want.Encode()[:23]); err == nil {
		t.Fatal("a 23-byte summary decoded")
	}
}
