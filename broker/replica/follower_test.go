package replica

import "testing"

// epochLog is an in-memory EpochLog with broker/log's EndOffsetForEpoch
// semantics, and the records' epochs so tests can compare logs.
type epochLog struct {
	epochs []int32 // epoch of the record at each offset
}

func (e *epochLog) EndOffset() int64 { return int64(len(e.epochs)) }

func (e *epochLog) LatestEpoch() int32 {
	if len(e.epochs) == 0 {
		return UndefinedEpoch
	}
	return e.epochs[len(e.epochs)-1]
}

func (e *epochLog) EndOffsetForEpoch(epoch int32) (int32, int64) {
	if epoch == UndefinedEpoch || len(e.epochs) == 0 {
		return UndefinedEpoch, UndefinedEpochOffset
	}
	if e.LatestEpoch() == epoch {
		return epoch, e.EndOffset()
	}
	// The first offset of the first epoch above the one asked for, and the
	// epoch just before it.
	for off, ep := range e.epochs {
		if ep > epoch {
			if off == 0 {
				return epoch, 0
			}
			return e.epochs[off-1], int64(off)
		}
	}
	return UndefinedEpoch, UndefinedEpochOffset
}

func (e *epochLog) append(epoch int32, n int) {
	for range n {
		e.epochs = append(e.epochs, epoch)
	}
}

func (e *epochLog) truncate(off int64) { e.epochs = e.epochs[:off] }

// answer is what a leader with log e replies to OffsetForLeaderEpoch(epoch).
func (e *epochLog) answer(epoch int32) EpochEndOffset {
	ep, end := e.EndOffsetForEpoch(epoch)
	return EpochEndOffset{ep, end}
}

// follow runs the whole truncation exchange between a follower and a leader.
func follow(t *testing.T, follower, leader *epochLog, hw int64) int64 {
	t.Helper()
	epoch := RequestEpoch(follower)
	for round := 0; ; round++ {
		if round > 10 {
			t.Fatal("truncation does not converge")
		}
		ans := EpochEndOffset{UndefinedEpoch, UndefinedEpochOffset}
		if epoch != UndefinedEpoch {
			ans = leader.answer(epoch)
		}
		d := TruncationFor(follower, hw, ans)
		if !d.AskAgain {
			follower.truncate(d.Offset)
			return d.Offset
		}
		if d.Epoch >= epoch {
			t.Fatalf("asked again for epoch %d after %d", d.Epoch, epoch)
		}
		epoch = d.Epoch
	}
}

func prefixEqual(a, b *epochLog, n int64) bool {
	if int64(len(a.epochs)) < n || int64(len(b.epochs)) < n {
		return false
	}
	for i := range n {
		if a.epochs[i] != b.epochs[i] {
			return false
		}
	}
	return true
}

func TestTruncation(t *testing.T) {
	cases := []struct {
		name     string
		follower func(*epochLog)
		leader   func(*epochLog)
		hw       int64
		want     int64
	}{
		{
			// The old leader appended 10..12 in epoch 1 that nobody fetched;
			// the new leader wrote 10..14 in epoch 2.
			name:     "divergent tail of an old leader",
			follower: func(e *epochLog) { e.append(1, 13) },
			leader:   func(e *epochLog) { e.append(1, 10); e.append(2, 5) },
			hw:       10,
			want:     10,
		},
		{
			// KIP-101 case 1: the follower's high watermark lags; truncating
			// to it would drop offset 1, which the leader has committed.
			name:     "stale high watermark keeps committed records",
			follower: func(e *epochLog) { e.append(1, 2) },
			leader:   func(e *epochLog) { e.append(1, 2) },
			hw:       1,
			want:     2,
		},
		{
			name:     "follower behind the leader truncates nothing",
			follower: func(e *epochLog) { e.append(1, 5) },
			leader:   func(e *epochLog) { e.append(1, 8); e.append(3, 2) },
			hw:       3,
			want:     5,
		},
		{
			// The follower led epoch 3 briefly; the leader never saw epoch 3
			// and answers with epoch 2, which the follower lacks: a second
			// round trip for epoch 1 finds the common point.
			name:     "second round trip for an epoch only one side has",
			follower: func(e *epochLog) { e.append(1, 5); e.append(3, 7) },
			leader:   func(e *epochLog) { e.append(1, 5); e.append(2, 5); e.append(4, 3) },
			hw:       4,
			want:     5,
		},
		{
			name:     "follower without epochs falls back to the high watermark",
			follower: func(e *epochLog) {},
			leader:   func(e *epochLog) { e.append(1, 5) },
			hw:       0,
			want:     0,
		},
		{
			// Every record the leader has is from a newer epoch than the
			// follower's: nothing is shared.
			name:     "follower epoch predates the leader's history",
			follower: func(e *epochLog) { e.append(1, 6) },
			leader:   func(e *epochLog) { e.append(5, 9) },
			hw:       4,
			want:     0,
		},
		{
			// The leader has no epoch history at all (answers UNDEFINED):
			// the high watermark is all that is known to be shared.
			name:     "leader does not know the epoch",
			follower: func(e *epochLog) { e.append(1, 6) },
			leader:   func(e *epochLog) {},
			hw:       4,
			want:     4,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, l := &epochLog{}, &epochLog{}
			c.follower(f)
			c.leader(l)
			got := follow(t, f, l, c.hw)
			if got != c.want {
				t.Fatalf("truncated to %d, want %d", got, c.want)
			}
			if !prefixEqual(f, l, min(got, l.EndOffset())) {
				t.Fatalf("logs differ below the truncation point: %v vs %v", f.epochs, l.epochs)
			}
		})
	}
}

func TestFollowerFetchRules(t *testing.T) {
	if got := FollowerHighWatermark(100, 40); got != 40 {
		t.Fatalf("follower high watermark %d beyond its log end 40", got)
	}
	if got := FollowerHighWatermark(30, 40); got != 30 {
		t.Fatalf("follower high watermark %d, want 30", got)
	}
	cases := []struct {
		localEnd, leaderStart, leaderEnd int64
		truncate, from                   int64
		reset                            bool
	}{
		{50, 0, 40, 40, 40, false},
		{10, 20, 40, -1, 20, true},
		{30, 20, 40, -1, 30, false},
	}
	for _, c := range cases {
		tr, from, reset := OutOfRange(c.localEnd, c.leaderStart, c.leaderEnd)
		if tr != c.truncate || from != c.from || reset != c.reset {
			t.Errorf("OutOfRange(%d, %d, %d) = %d %d %v, want %d %d %v", c.localEnd, c.leaderStart, c.leaderEnd, tr, from, reset, c.truncate, c.from, c.reset)
		}
	}
}
