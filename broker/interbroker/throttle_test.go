package interbroker

import (
	"testing"
	"time"

	"millrace/broker/log"
	"millrace/broker/replication"
)

// exceededQuota is a follower quota with left bytes left, exceeded at 0
// or below.
type exceededQuota struct{ left, recorded int64 }

func (q *exceededQuota) Exceeded(time.Time) bool     { return q.left <= 0 }
func (q *exceededQuota) Available(time.Time) int64   { return q.left }
func (q *exceededQuota) Record(n int64, _ time.Time) { q.recorded += n }

// TestFollowerThrottle: over follower.replication.throttled.rate, a
// replica listed for this broker and behind its leader's high watermark is
// left out of the fetch; a caught-up one, or one not listed, is fetched.
func TestFollowerThrottle(t *testing.T) {
	t.Parallel()
	open := func(throttled string) *log.Log {
		cfg := log.DefaultConfig()
		cfg.FollowerReplicationThrottledReplicas = throttled
		l, err := log.Open(t.TempDir(), cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	fs := &Fetchers{brokerID: 2}
	fs.ThrottleReplication(&exceededQuota{})
	lf := &leaderFetcher{fs: fs}
	part := func(l *log.Log, partition int32, leaderHW int64) *fetchedPartition {
		fp := &fetchedPartition{p: &replication.Followed{TopicPartition: log.TopicPartition{Topic: "moving", Partition: partition}, Log: l}}
		fp.leaderHighWatermark = leaderHW
		return fp
	}
	behind := part(open("0:2"), 0, 100)
	caughtUp := part(open("0:2"), 0, 0)
	otherBroker := part(open("0:1"), 0, 100)
	all := part(open("*"), 3, 100)
	got := lf.unthrottled([]*fetchedPartition{behind, caughtUp, otherBroker, all}, time.Now())
	if len(got) != 2 || got[0] != caughtUp || got[1] != otherBroker {
		t.Errorf("fetched %d partitions, want the caught-up one and the one listed for another broker", len(got))
	}
	fs.quota = nil
	if got := lf.unthrottled([]*fetchedPartition{behind}, time.Now()); len(got) != 1 {
		t.Errorf("with no follower rate every partition is fetched")
	}
}

// TestFollowerThrottleAsksForWhatIsLeft: a throttled replica's fetch asks
// for at most the bytes follower.replication.throttled.rate has left (1
// at least: the leader still sends a batch), not followerFetchBytes, so
// one answer cannot overdraw the rate by several seconds' worth; an
// unthrottled one asks for the full amount.
func TestFollowerThrottleAsksForWhatIsLeft(t *testing.T) {
	t.Parallel()
	l, err := log.Open(t.TempDir(), func() log.Config {
		cfg := log.DefaultConfig()
		cfg.FollowerReplicationThrottledReplicas = "0:2"
		return cfg
	}(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	q := &exceededQuota{left: 1000}
	fs := &Fetchers{brokerID: 2}
	fs.ThrottleReplication(q)
	lf := &leaderFetcher{fs: fs}
	fp := &fetchedPartition{p: &replication.Followed{TopicPartition: log.TopicPartition{Topic: "moving", Partition: 0}, Log: l}}
	fp.leaderHighWatermark = 100
	if got := lf.partitionMaxBytes(fp, time.Now()); got != 1000 {
		t.Errorf("behind, 1000 bytes left: asks for %d", got)
	}
	q.left = -50
	if got := lf.partitionMaxBytes(fp, time.Now()); got != 1 {
		t.Errorf("behind, rate overdrawn: asks for %d, want 1", got)
	}
	fp.leaderHighWatermark = 0 // caught up: not throttled
	if got := lf.partitionMaxBytes(fp, time.Now()); got != followerFetchBytes {
		t.Errorf("caught up: asks for %d, want %d", got, followerFetchBytes)
	}
}
