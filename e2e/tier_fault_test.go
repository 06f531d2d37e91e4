package e2e

import (
	"context"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/broker/tier"
	"millrace/internal/waitfor"
)

// TestTieredLeaderKilledMidUpload: two brokers keep a tiered partition
// (RF 2) in versitygw. The follower is restarted with another
// log.segment.bytes (the topic sets none), so its segment boundaries
// differ from the leader's, as on brokers configured apart. While a
// producer writes, the store holds the leader's upload of a segment after
// its .log object is stored and before its .index is; the leader is SIGKILLed there, so that .log is stored but never recorded.
// The follower takes over and continues the uploads from the remote end
// with its own boundaries. Then the remote state is whole: its segments
// run from the remote log start without a gap to the new leader's local
// log start, overlap only where the new leader's first segment straddles
// the previous end (state.go), every one has its five objects with the
// recorded .log size, and once the sweep grace has passed the store holds
// nothing else (the killed upload's object swept, or adopted had the new
// leader uploaded the same range). Every acknowledged record is read back
// exactly once: below the local log start from the remote .log objects,
// above it from the new leader; a consumer from offset 0 reads the same
// through the new leader, across the overlap and the boundary.
func TestTieredLeaderKilledMidUpload(t *testing.T) {
	t.Parallel()
	const topic = "tier-kill"
	c := startTieredS3Cluster(t, 2,
		"remote.log.manager.task.interval.ms=200",
		"millrace.remote.storage.sweep.grace.ms=3000",
		"log.segment.bytes=4096")
	// min.insync.replicas=1: the survivor alone acknowledges after the kill.
	c.createTiered(topic, 2, map[string]string{"min.insync.replicas": "1"})
	adm := c.admin()

	producer := producePaced(t, c.localCluster, topic, 10*time.Millisecond)
	defer producer.finish()
	waitfor.Until(t, 60*time.Second, "two segments recorded remotely", func() bool {
		return len(c.remoteState(topic).Segments) >= 2
	})
	follower := c.nodes[3-c.leader(topic)]
	c.signal(follower.id, syscall.SIGTERM)
	follower.args = slices.Clone(follower.args)
	follower.args[slices.Index(follower.args, "log.segment.bytes=4096")] = "log.segment.bytes=6000"
	c.restart(follower.id)
	waitfor.Until(t, 60*time.Second, "the restarted follower back in the ISR", func() bool { return c.fullyReplicated(adm, topic) })

	held := c.proxy.holdNextPut(tier.IndexSuffix)
	var heldName string
	select {
	case heldName = <-held:
	case <-time.After(60 * time.Second):
		t.Fatal("no segment upload reached its .index object within 60 s")
	}
	victim := c.leader(topic)
	c.signal(victim, syscall.SIGKILL)
	c.proxy.releaseHeld()
	orphan := strings.TrimSuffix(heldName, tier.IndexSuffix)
	before := c.remoteState(topic)
	if slices.ContainsFunc(before.Segments, func(s tier.Segment) bool { return s.Key == orphan }) {
		t.Fatalf("the killed upload's segment %s is recorded", orphan)
	}
	if _, ok := c.objects()[orphan+tier.LogSuffix]; !ok {
		t.Fatalf("the killed upload's %s object is not in the store", orphan+tier.LogSuffix)
	}
	t.Logf("broker %d killed uploading %s; the state ends at %d (leader epoch %d)", victim, orphan, before.End(), before.LeaderEpoch)

	waitfor.Until(t, 60*time.Second, "the new leader to upload three segments", func() bool {
		st := c.remoteState(topic)
		n := 0
		for _, s := range st.Segments {
			if s.LeaderEpoch > before.LeaderEpoch {
				n++
			}
		}
		return n >= 3
	})
	producer.finish()
	if leader := c.leader(topic); leader != 3-victim {
		t.Fatalf("leader %d after broker %d was killed", leader, victim)
	}

	// Every closed segment uploaded, and after the grace nothing but the
	// state's objects in the store.
	var st tier.State
	var unreferenced []string
	defer reportLastSeen(t, func() string { return fmt.Sprintf("unreferenced objects %v", unreferenced) })()
	waitfor.Until(t, 60*time.Second, "the store to hold only the state's objects", func() bool {
		st = c.remoteState(topic)
		unreferenced = unreferencedObjects(st, c.objects())
		return len(unreferenced) == 0 && c.earliestLocal(topic) <= st.End()
	})
	adopted := slices.ContainsFunc(st.Segments, func(s tier.Segment) bool { return s.Key == orphan })
	if swept := scrapeCounter(t, c.metricsURL(3-victim), "millrace_tier_swept_objects_total"); !adopted && swept < 1 {
		t.Errorf("the killed upload's objects are gone but the new leader counts %v swept objects", swept)
	}
	overlaps := 0
	for i := 1; i < len(st.Segments); i++ {
		if st.Segments[i].BaseOffset <= st.Segments[i-1].LastOffset {
			overlaps++
		}
	}
	t.Logf("the killed upload's objects were %s; %d remote segments up to %d, %d overlapping the one before",
		map[bool]string{true: "adopted by the new leader's upload of the same range", false: "swept"}[adopted], len(st.Segments), st.End(), overlaps)
	checkRemoteState(t, st, c.objects())

	// Every acknowledged record, exactly once.
	got := map[int64]int64{} // offset -> value
	for _, s := range st.Segments {
		name := s.Key + tier.LogSuffix
		records := segmentRecords(t, name, c.object(name))
		if len(records) == 0 || records[0].Offset != s.BaseOffset || records[len(records)-1].Offset != s.LastOffset {
			t.Fatalf("%s holds %d records, not offsets %d to %d", name, len(records), s.BaseOffset, s.LastOffset)
		}
		for _, r := range records {
			v := recordValue(t, r)
			if prev, ok := got[r.Offset]; ok && prev != v {
				t.Fatalf("offset %d is %d in one remote segment and %d in %s", r.Offset, prev, v, name)
			}
			got[r.Offset] = v
		}
	}
	localStart := c.earliestLocal(topic)
	ends, err := c.admin().ListEndOffsets(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup(topic, 0)
	cl := c.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(localStart)}}))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for next := localStart; next < end.Offset; {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading the local tail from %d: at %d of %d", localStart, next, end.Offset)
		}
		fetches.EachError(func(_ string, _ int32, err error) { t.Logf("fetch: %v", err) })
		fetches.EachRecord(func(r *kgo.Record) {
			v := recordValue(t, r)
			if prev, ok := got[r.Offset]; ok && prev != v {
				t.Fatalf("offset %d is %d remotely and %d locally", r.Offset, prev, v)
			}
			got[r.Offset] = v
			next = r.Offset + 1
		})
	}
	for o := st.LogStartOffset; o < end.Offset; o++ {
		if _, ok := got[o]; !ok {
			t.Fatalf("offset %d is neither remote nor local (remote %d to %d, local from %d to %d)", o, st.LogStartOffset, st.End(), localStart, end.Offset)
		}
	}
	// The broker reads the same across the boundary and the straddling
	// overlap: a consumer from offset 0 gets every offset once, as stored.
	fromZero := c.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(0)}}))
	for next := st.LogStartOffset; next < end.Offset; {
		fetches := fromZero.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading from offset 0: at %d of %d", next, end.Offset)
		}
		fetches.EachError(func(_ string, _ int32, err error) { t.Logf("fetch: %v", err) })
		fetches.EachRecord(func(r *kgo.Record) {
			if r.Offset != next || recordValue(t, r) != got[next] {
				t.Fatalf("consumed offset %d value %d; want offset %d value %d", r.Offset, recordValue(t, r), next, got[next])
			}
			next++
		})
	}
	var records []ackedRecord
	for _, o := range slices.Sorted(maps.Keys(got)) {
		records = append(records, ackedRecord{o, got[o]})
	}
	checkAcknowledged(t, producer.acks, map[int32][]ackedRecord{0: records})
	t.Logf("%d records acknowledged (%d produces failed), %d read back", producer.acks.count(), producer.acks.failed, len(records))
}

// unreferencedObjects lists the objects st does not name, in order.
func unreferencedObjects(st tier.State, objects map[string]int64) []string {
	referenced := map[string]bool{}
	for _, s := range st.Segments {
		for _, suffix := range []string{tier.LogSuffix, tier.IndexSuffix, tier.TimeIndexSuffix, tier.TxnIndexSuffix, tier.SnapshotSuffix} {
			referenced[s.Key+suffix] = true
		}
	}
	var out []string
	for name := range objects {
		if !referenced[name] {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// checkRemoteState checks a partition's remote state as broker/tier's
// state.go defines it: segments sorted by base offset, each ending after
// the one before and starting no later than just after it (no gap); a
// segment may start inside the previous one only when a newer leader
// uploaded it (the straddling first segment of a new leader, which
// continues after the previous end with its own boundaries); the first
// holds the remote log start; each is named by its offset range and has
// its five objects, the .log of the recorded size.
func checkRemoteState(t *testing.T, st tier.State, objects map[string]int64) {
	t.Helper()
	if len(st.Segments) == 0 {
		t.Fatal("the remote state has no segments")
	}
	if first := st.Segments[0]; st.LogStartOffset < first.BaseOffset || st.LogStartOffset > first.LastOffset {
		t.Errorf("remote log start %d is outside the first segment, %d to %d", st.LogStartOffset, first.BaseOffset, first.LastOffset)
	}
	for i, s := range st.Segments {
		if want := fmt.Sprintf("%020d-%020d", s.BaseOffset, s.LastOffset); path.Base(s.Key) != want {
			t.Errorf("segment %d to %d is named %s", s.BaseOffset, s.LastOffset, s.Key)
		}
		if size, ok := objects[s.Key+tier.LogSuffix]; !ok || size != s.Size {
			t.Errorf("%s: stored %v with %d bytes, recorded %d", s.Key+tier.LogSuffix, ok, size, s.Size)
		}
		for _, suffix := range []string{tier.IndexSuffix, tier.TimeIndexSuffix, tier.TxnIndexSuffix, tier.SnapshotSuffix} {
			if _, ok := objects[s.Key+suffix]; !ok {
				t.Errorf("%s is not stored", s.Key+suffix)
			}
		}
		if i == 0 {
			continue
		}
		prev := st.Segments[i-1]
		switch {
		// A straddling segment may start below the previous one's base
		// (state.go): the new leader cut its segments elsewhere. What
		// readers rely on is the last offsets' order.
		case s.LastOffset <= prev.LastOffset:
			t.Errorf("segment %d to %d follows %d to %d: out of order", s.BaseOffset, s.LastOffset, prev.BaseOffset, prev.LastOffset)
		case s.BaseOffset > prev.LastOffset+1:
			t.Errorf("gap between segment %d to %d and %d to %d", prev.BaseOffset, prev.LastOffset, s.BaseOffset, s.LastOffset)
		case s.BaseOffset <= prev.LastOffset && s.LeaderEpoch <= prev.LeaderEpoch:
			t.Errorf("segment %d to %d (leader epoch %d) overlaps %d to %d (leader epoch %d) with no leader change", s.BaseOffset, s.LastOffset, s.LeaderEpoch, prev.BaseOffset, prev.LastOffset, prev.LeaderEpoch)
		case s.LeaderEpoch < prev.LeaderEpoch:
			t.Errorf("segment %d to %d has leader epoch %d after %d", s.BaseOffset, s.LastOffset, s.LeaderEpoch, prev.LeaderEpoch)
		}
	}
}

// TestTieredStoreStopsAnswering: two brokers keep a tiered partition (RF
// 2, local.retention.bytes=1) in versitygw, which is stopped (SIGSTOP) for
// 30 s while an acks=all producer and a consumer of the tail go on. During
// the outage the leader's uploads fail and are counted, at most one
// attempt per round (no tight loop: the store sees a bounded number of
// requests), the remote end stays where it was and local retention keeps
// every segment not yet remote (the leader's local log start stays at or
// below the remote end while its segments pile up), and every produce is
// acknowledged and consumed within normal latency. Once the store answers
// again the uploads catch up and local retention deletes the backlog.
func TestTieredStoreStopsAnswering(t *testing.T) {
	t.Parallel()
	const topic, outage, interval = "tier-outage", 30 * time.Second, 500 * time.Millisecond
	c := startTieredS3Cluster(t, 2, fmt.Sprintf("remote.log.manager.task.interval.ms=%d", interval.Milliseconds()))
	c.createTiered(topic, 2, map[string]string{"segment.bytes": "4096", "min.insync.replicas": "2"})
	leader := c.leader(topic)
	metrics := c.metricsURL(leader)
	localDir := c.nodes[leader].data + "/logs/" + topic + "-0"

	producer := producePaced(t, c.localCluster, topic, 20*time.Millisecond)
	defer producer.finish()
	consumed := consumeTail(t, c.localCluster, topic)
	waitfor.Until(t, 60*time.Second, "three segments remote and only the tail local", func() bool {
		return len(c.remoteState(topic).Segments) >= 3 && len(localSegments(t, localDir)) <= 2
	})
	baseline := time.Now()
	waitfor.Until(t, 30*time.Second, "five seconds of produces before the outage", func() bool { return time.Since(baseline) >= 5*time.Second })
	before := producer.within(baseline, time.Now())

	errorsBefore, requestsBefore := scrapeCounter(t, metrics, "millrace_tier_upload_errors_total"), c.proxy.count()
	stopped := time.Now()
	if err := c.s3.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			c.s3.cmd.Process.Signal(syscall.SIGCONT)
		}
	}
	defer resume()
	// An upload the store finished just before it stopped may still be
	// recorded; once a request has waited a second, the leader is stuck in
	// it and the remote end is where the outage holds it.
	waitfor.Until(t, 10*time.Second, "the leader to wait for the stopped store", func() bool { return c.proxy.waiting() >= time.Second })
	remoteEnd := c.remoteState(topic).End()
	segmentsAtStop := len(localSegments(t, localDir))
	maxLocal := segmentsAtStop
	// The outage's 30 s are the point: watched, not slept through.
	for time.Since(stopped) < outage {
		if st := c.remoteState(topic); st.End() != remoteEnd {
			t.Fatalf("the remote end moved from %d to %d with the store stopped", remoteEnd, st.End())
		}
		if start := c.earliestLocal(topic); start > remoteEnd {
			t.Fatalf("the leader's local log start is %d, past the remote end %d: a segment not uploaded was deleted", start, remoteEnd)
		}
		maxLocal = max(maxLocal, len(localSegments(t, localDir)))
		time.Sleep(500 * time.Millisecond) // a sample every half second

	}
	during := producer.within(stopped, time.Now())
	endDuring := producer.lastAcked()
	resume()
	uploadErrors := scrapeCounter(t, metrics, "millrace_tier_upload_errors_total") - errorsBefore
	requests := c.proxy.count() - requestsBefore
	t.Logf("store stopped %v: %v upload errors, %d requests to the store, local segments %d -> %d; produce p99 %v before (%d), %v during (%d), max %v",
		outage, uploadErrors, requests, segmentsAtStop, maxLocal, percentile(before, 0.99), len(before), percentile(during, 0.99), len(during), percentile(during, 1))

	if uploadErrors < 1 {
		t.Errorf("no upload error counted in %v of the store not answering", outage)
	}
	// A round every interval tries the oldest segment once; a request of
	// it may be retried by the S3 client, and the sweep lists once.
	if limit := 3 * int(outage/interval); requests > limit {
		t.Errorf("%d requests to the stopped store in %v, more than %d: a tight retry loop", requests, outage, limit)
	}
	if maxLocal < segmentsAtStop+3 {
		t.Errorf("the leader's local segments went from %d to at most %d: were the produces written?", segmentsAtStop, maxLocal)
	}
	if len(during) < int(outage/(20*time.Millisecond))/4 {
		t.Errorf("only %d produces acknowledged during the outage", len(during))
	}
	if p99, limit := percentile(during, 0.99), max(3*percentile(before, 0.99), 500*time.Millisecond); p99 > limit {
		t.Errorf("produce p99 %v during the outage, over %v (p99 before: %v)", p99, limit, percentile(before, 0.99))
	}
	waitfor.Until(t, 30*time.Second, "the consumer to read every record acknowledged during the outage", func() bool {
		return consumed.upTo(endDuring)
	})
	if lag := consumed.maxLag(stopped, stopped.Add(outage)); lag > 2*time.Second {
		t.Errorf("a record produced during the outage was consumed %v after it was produced", lag)
	}

	// The store is back: uploads catch up, local retention deletes.
	waitfor.Until(t, 90*time.Second, "uploads to catch up and local retention to delete the backlog", func() bool {
		return c.remoteState(topic).End() > endDuring && len(localSegments(t, localDir)) <= 2
	})
	producer.finish()
	checkRemoteState(t, c.remoteState(topic), c.objects())
}

// tailConsumer reads a partition from its end on, noting for each record
// how long after its timestamp it arrived.
type tailConsumer struct {
	mu      sync.Mutex // guards the following
	last    int64      // offset of the last record read; -1 for none
	arrived []timedLatency
}

// consumeTail starts a tailConsumer of partition 0 of topic.
func consumeTail(t *testing.T, c *localCluster, topic string) *tailConsumer {
	cl := c.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtEnd()}}),
		kgo.FetchMaxWait(200*time.Millisecond))
	tc := &tailConsumer{last: -1}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() {
		cancel()
		<-done
	})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			fetches := cl.PollFetches(ctx)
			now := time.Now()
			tc.mu.Lock()
			fetches.EachRecord(func(r *kgo.Record) {
				tc.last = r.Offset
				tc.arrived = append(tc.arrived, timedLatency{r.Timestamp, now.Sub(r.Timestamp)})
			})
			tc.mu.Unlock()
		}
	}()
	return tc
}

// upTo reports whether the consumer has read offset.
func (tc *tailConsumer) upTo(offset int64) bool {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	return tc.last >= offset
}

// maxLag is the longest a record produced in [from, to) took to arrive.
func (tc *tailConsumer) maxLag(from, to time.Time) time.Duration {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	var lag time.Duration
	for _, a := range tc.arrived {
		if !a.at.Before(from) && a.at.Before(to) {
			lag = max(lag, a.took)
		}
	}
	return lag
}
