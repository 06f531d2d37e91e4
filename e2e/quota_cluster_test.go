package e2e

// Quotas on a 3-broker ZooKeeper cluster: a client quota changed through one
// broker applies on all of them (the replication throttle's test is in
// quota_reassign_test.go).

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/internal/waitfor"
)

// throttleHook passes franz-go's throttle reports to a function.
type throttleHook func(meta kgo.BrokerMetadata, interval time.Duration)

// OnBrokerThrottle implements kgo.HookBrokerThrottle.
func (h throttleHook) OnBrokerThrottle(meta kgo.BrokerMetadata, interval time.Duration, _ bool) {
	h(meta, interval)
}

// probeAnswer is one acknowledged produce of a quotaProbe: when its answer
// came and the throttle time it carried.
type probeAnswer struct {
	at       time.Time
	throttle time.Duration
}

// quotaProbe produces a 1 KiB record every 10 ms to a partition one broker
// leads, under one client ID, and keeps every answer. After a throttled
// answer it starts a new client: the old connection is muted (KIP-219) and
// franz-go waits out the throttle before its next request there, so only a
// fresh connection shows promptly when the broker stops throttling.
type quotaProbe struct {
	broker, partition int32

	mu      sync.Mutex // guards the following
	answers []probeAnswer
	err     error // the last produce error, for the failure message
}

// run probes until ctx ends.
func (p *quotaProbe) run(ctx context.Context, seeds []string, topic, clientID string) {
	var throttle atomic.Int64 // the newest throttle broker p.broker reported
	hook := throttleHook(func(meta kgo.BrokerMetadata, interval time.Duration) {
		if meta.NodeID == p.broker {
			throttle.Store(int64(interval))
		}
	})
	var cl *kgo.Client
	defer func() {
		if cl != nil {
			cl.Close()
		}
	}()
	value := make([]byte, 1024)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if cl == nil {
			var err error
			cl, err = kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ClientID(clientID), kgo.WithHooks(hook),
				kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
			if err != nil {
				p.fail(err)
				return
			}
		}
		throttle.Store(0)
		err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p.partition, Value: value}).FirstErr()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			p.fail(err)
			continue
		}
		answer := probeAnswer{at: time.Now(), throttle: time.Duration(throttle.Load())}
		p.mu.Lock()
		p.answers = append(p.answers, answer)
		p.mu.Unlock()
		if answer.throttle > 0 {
			cl.Close()
			cl = nil
		}
	}
}

func (p *quotaProbe) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.err = err
}

// snapshot returns the answers so far and the last error.
func (p *quotaProbe) snapshot() ([]probeAnswer, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]probeAnswer(nil), p.answers...), p.err
}

// firstThrottled returns the first throttled answer's time.
func firstThrottled(answers []probeAnswer) (time.Time, bool) {
	for _, a := range answers {
		if a.throttle > 0 {
			return a.at, true
		}
	}
	return time.Time{}, false
}

// unthrottledSince returns when the run of unthrottled answers that ends
// the list began, counting only answers after from, and how long the run
// is; a throttled last answer gives a run of 0.
func unthrottledSince(answers []probeAnswer, from time.Time) (time.Time, int) {
	var start time.Time
	run := 0
	for _, a := range answers {
		switch {
		case a.at.Before(from):
		case a.throttle > 0:
			start, run = time.Time{}, 0
		default:
			if run == 0 {
				start = a.at
			}
			run++
		}
	}
	return start, run
}

// TestQuotaClusterPropagation sets a producer_byte_rate for a client ID
// through one broker of three (kadm AlterClientQuotas) while the client
// produces to a partition each broker leads: every broker's answers carry
// throttle_time_ms within 2 s of the alter's answer (its follower of
// /config/changes applied it), and within 2 s of the quota's deletion they
// stop. The time each broker took is logged.
func TestQuotaClusterPropagation(t *testing.T) {
	t.Parallel()
	const topic, clientID = "quota-propagation", "noisy"
	// 64 bytes/s: Kafka's rate is measured over at least 10 one-second
	// windows, so a budget of 640 bytes, which one 1 KiB record exceeds;
	// the first answer after a broker applies the quota is throttled.
	const byteRate = 64
	const within = 2 * time.Second
	c := startLocalCluster(t, 3, 1)
	c.createAssignedTopic(topic, [][]int32{{1, 2}, {2, 3}, {3, 1}})
	adm := c.admin()
	// The broker asked may not know the topic yet: createAssignedTopic
	// waited until one broker saw it fully replicated.
	var parts kadm.PartitionDetails
	waitfor.Until(t, 20*time.Second, "the topic's metadata", func() bool {
		var err error
		parts, err = c.partitions(adm, topic)
		return err == nil
	})
	probes := map[int32]*quotaProbe{}
	for _, p := range parts {
		probes[p.Leader] = &quotaProbe{broker: p.Leader, partition: p.Partition}
	}
	if len(probes) != 3 {
		t.Fatalf("the partitions' leaders are %v, want one partition led by each broker", parts)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var running sync.WaitGroup
	t.Cleanup(func() { cancel(); running.Wait() })
	for _, p := range probes {
		running.Go(func() { p.run(ctx, c.seeds(), topic, clientID) })
	}
	// Each probe answered unthrottled before there is any quota.
	waitfor.Until(t, 30*time.Second, "every broker to acknowledge the probe's records", func() bool {
		for _, p := range probes {
			if answers, _ := p.snapshot(); len(answers) < 5 {
				return false
			}
		}
		return true
	})

	name := clientID
	entity := kadm.ClientQuotaEntity{{Type: "client-id", Name: &name}}
	alter := func(op kadm.AlterClientQuotaOp) time.Time {
		t.Helper()
		actx, acancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer acancel()
		resp, err := adm.AlterClientQuotas(actx, []kadm.AlterClientQuotaEntry{{Entity: entity, Ops: []kadm.AlterClientQuotaOp{op}}})
		if err == nil && len(resp) == 1 {
			err = resp[0].Err
		}
		if err != nil {
			t.Fatalf("AlterClientQuotas %+v: %v", op, err)
		}
		return time.Now()
	}

	set := alter(kadm.AlterClientQuotaOp{Key: "producer_byte_rate", Value: byteRate})
	waitfor.Until(t, 30*time.Second, "every broker to throttle the client", func() bool {
		for _, p := range probes {
			if answers, _ := p.snapshot(); !hasThrottled(answers) {
				return false
			}
		}
		return true
	})
	for id := int32(1); id <= 3; id++ {
		answers, _ := probes[id].snapshot()
		first, _ := firstThrottled(answers)
		took := first.Sub(set)
		t.Logf("broker %d: first throttled answer %v after the alter's answer", id, took.Round(time.Millisecond))
		if first.Before(set) {
			t.Errorf("broker %d throttled the client %v before the quota was set", id, set.Sub(first))
		}
		if took > within {
			t.Errorf("broker %d applied the quota %v after the alter's answer, want within %v", id, took, within)
		}
	}

	deleted := alter(kadm.AlterClientQuotaOp{Key: "producer_byte_rate", Remove: true})
	// Twenty unthrottled answers in a row (200 ms of probing) on a fresh
	// connection: the broker no longer applies the quota.
	waitfor.Until(t, 30*time.Second, "every broker to stop throttling the client", func() bool {
		for _, p := range probes {
			answers, _ := p.snapshot()
			if _, run := unthrottledSince(answers, deleted); run < 20 {
				return false
			}
		}
		return true
	})
	for id := int32(1); id <= 3; id++ {
		answers, err := probes[id].snapshot()
		start, _ := unthrottledSince(answers, deleted)
		took := start.Sub(deleted)
		t.Logf("broker %d: unthrottled from %v after the delete's answer (%d answers in all, last produce error %v)", id, took.Round(time.Millisecond), len(answers), err)
		if took > within {
			t.Errorf("broker %d kept throttling %v after the quota's deletion, want within %v", id, took, within)
		}
	}
}

// hasThrottled reports whether any answer was throttled.
func hasThrottled(answers []probeAnswer) bool {
	_, ok := firstThrottled(answers)
	return ok
}
