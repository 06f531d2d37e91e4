package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/internal/waitfor"

	"millrace/internal/recordbatch"
)

// cleanedUpTo is the highest end of a cleaning pass a broker logged for
// partition 0 of topic, -1 if none.
func cleanedUpTo(t *testing.T, node *clusterNode, topic string) int64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(filepath.Dir(node.data), "broker.log"))
	if err != nil {
		t.Fatal(err)
	}
	if node.proc != nil { // restarted by the test: its output is kept here
		b = append(b, node.proc.log()...)
	}
	re := regexp.MustCompile(`msg="cleaned log".* dir=` + regexp.QuoteMeta(topic) + `-0 .*\bto=(\d+)`)
	best := int64(-1)
	for _, m := range re.FindAllSubmatch(b, -1) {
		n, _ := strconv.ParseInt(string(m[1]), 10, 64)
		best = max(best, n)
	}
	return best
}

// TestClusterCompactedTopic: keyed records with overwrites and tombstones
// on a 3-broker cluster; once the topic is compacted, every replica
// cleans on its own and ends with the same bytes, and a consumer reading
// from offset 0 sees each live key once, with its last value at the offset
// it was written at, and no deleted key (delete.retention.ms=0), reading
// across the emptied batch kept for an idempotent producer.
func TestClusterCompactedTopic(t *testing.T) {
	t.Parallel()
	testCompactedTopic(t, false, "log.cleaner.backoff.ms=200")
}

// TestClusterCompactedTopicCleanerKilled is TestClusterCompactedTopic with
// a broker SIGKILLed while it writes a cleaned segment (the cleaner
// throttled so that a pass takes seconds): it reopens with its old
// segments, cleans again, and ends like the others.
func TestClusterCompactedTopicCleanerKilled(t *testing.T) {
	t.Parallel()
	testCompactedTopic(t, true, "log.cleaner.backoff.ms=200", "log.cleaner.io.max.bytes.per.second=100000")
}

func testCompactedTopic(t *testing.T, killDuringCleaning bool, settings ...string) {
	const (
		topic  = "compacted"
		keys   = 500
		rounds = 8
		tombs  = 50
		filler = 400
	)
	c := startLocalClusterWith(t, 3, 1, settings...)
	adm := c.admin()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Written under the delete policy, compacted once all of it is
	// replicated: every replica then cleans the same range in one pass.
	resp, err := adm.CreateTopic(ctx, 1, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2"), "segment.bytes": kadm.StringPtr("16384")}, topic)
	if err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	waitfor.Until(c.t, 30*time.Second, "the topic on every broker", func() bool {
		for _, node := range c.nodes {
			if !knowsTopic(node, topic, 1) {
				return false
			}
		}
		return c.fullyReplicated(adm, topic)
	})

	producer := c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchCompression(kgo.GzipCompression()), kgo.ProducerLinger(5*time.Millisecond),
		// Batches well under segment.bytes, so data and filler span segments.
		kgo.ProducerBatchMaxBytes(4096))
	type last struct {
		offset int64
		value  string // "" for a tombstone
	}
	want := map[string]last{}
	produce := func(recs []*kgo.Record) {
		t.Helper()
		results := producer.ProduceSync(ctx, recs...)
		if err := results.FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
		for _, r := range results {
			want[string(r.Record.Key)] = last{r.Record.Offset, string(r.Record.Value)}
		}
	}
	// A producer of its own writes one batch whose keys are all written
	// again later: the cleaner keeps that batch, emptied, as the
	// producer's last, and consumers must read across it.
	early := producer
	producer = c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(time.Second))
	var first []*kgo.Record
	for k := range 20 {
		first = append(first, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "k%d", k), Value: []byte("early")})
	}
	produce(first)
	producer = early
	for round := range rounds {
		var recs []*kgo.Record
		for k := range keys {
			recs = append(recs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "k%d", k), Value: fmt.Appendf(nil, "v%d-%d", k, round)})
		}
		produce(recs)
	}
	var recs []*kgo.Record
	for k := range tombs {
		recs = append(recs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "k%d", k*7)})
	}
	produce(recs)
	dataEnd := int64(20 + keys*rounds + tombs)
	// Incompressible records with keys of their own push the data out of
	// every replica's active segment, which is never cleaned.
	recs = nil
	for i := range filler {
		v := make([]byte, 100)
		rand.Read(v)
		recs = append(recs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "f%d", i), Value: []byte(hex.EncodeToString(v))})
	}
	produce(recs)
	end := dataEnd + filler
	waitfor.Until(c.t, 30*time.Second, "full replication", func() bool { return c.fullyReplicated(adm, topic) })

	alter, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "cleanup.policy", Value: kadm.StringPtr("compact")},
		{Op: kadm.SetConfig, Name: "delete.retention.ms", Value: kadm.StringPtr("0")},
	}, topic)
	if err == nil {
		_, err = alter.On(topic, nil)
	}
	if err != nil {
		t.Fatalf("alter cleanup.policy: %v", err)
	}
	if killDuringCleaning {
		victim := int32(-1)
		waitfor.Until(c.t, 60*time.Second, "a cleaned segment being written", func() bool {
			for id, node := range c.nodes {
				if m, _ := filepath.Glob(filepath.Join(node.data, "logs", topic+"-0", "*.cleaned")); len(m) > 0 {
					victim = id
					return true
				}
			}
			return false
		})
		c.signal(victim, syscall.SIGKILL)
		finished := cleanedUpTo(t, c.nodes[victim], topic) >= 0
		c.restart(victim)
		if finished {
			// The pass ended in the moment between the look and the kill.
			t.Logf("broker %d finished its pass before it was killed", victim)
		} else {
			// Open deleted the unfinished replacement (or completed a
			// committed one) before anything else.
			c.nodes[victim].proc.waitLog("segment replacement", 1, 10*time.Second)
		}
	}
	waitfor.Until(c.t, 60*time.Second, "every replica to clean past the data", func() bool {
		for _, node := range c.nodes {
			if cleanedUpTo(t, node, topic) < dataEnd {
				return false
			}
		}
		return true
	})

	consumer := c.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(0)}}))
	seen := map[string]bool{}
	prev := int64(-1)
	for prev < end-1 {
		fetches := consumer.PollFetches(ctx)
		if err := fetches.Err(); err != nil {
			t.Fatalf("consume: %v", err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			key := string(r.Key)
			w, ok := want[key]
			switch {
			case r.Offset <= prev:
				t.Fatalf("offset %d after %d", r.Offset, prev)
			case !ok || w.offset != r.Offset || w.value != string(r.Value):
				t.Fatalf("record %d %s=%q is not its key's last write %+v", r.Offset, key, r.Value, w)
			case r.Value == nil:
				t.Fatalf("tombstone of %s at %d kept past delete.retention.ms=0", key, r.Offset)
			case seen[key]:
				t.Fatalf("key %s twice", key)
			}
			seen[key] = true
			prev = r.Offset
		})
	}
	live := 0
	for key, w := range want {
		if w.value != "" {
			live++
			if !seen[key] {
				t.Errorf("live key %s (last written at %d) missing", key, w.offset)
			}
		}
	}
	if len(seen) != live || live != keys-tombs+filler {
		t.Fatalf("consumer saw %d keys, want %d live", len(seen), live)
	}
	// Same bytes on every replica: each compacted on its own.
	c.checkReplicasIdentical(topic, 1)
	// The early producer's batch is there, emptied, at its offsets.
	b := readLogDirect(t, c.nodes[c.initial[0]].data, topic, 0)
	h, err := recordbatch.ParseHeader(b)
	if err != nil || h.BaseOffset != 0 || h.LastOffsetDelta != 19 || h.Records != 0 {
		t.Fatalf("first batch: %+v %v", h, err)
	}
}
