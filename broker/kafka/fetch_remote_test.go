package kafka

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/log"
	"millrace/broker/tier"
	"millrace/store/storetest"
)

// remoteFixture is a broker whose partition "old"/0 has its closed
// segments copied into a store, as tiered storage's write side uploads
// them, and its local log start moved past all but the last of them; and
// a partition "new"/0 that is all local.
type remoteFixture struct {
	tb         *testBroker
	store      *storetest.Gated
	cache      *tier.Cache
	segments   []tier.Segment
	localStart int64
	end        int64 // the log end of "old"/0
	// firstTimestamp is the timestamp of "old"/0's first batch; batch i
	// holds offsets 2i and 2i+1 at firstTimestamp+10i and one more.
	firstTimestamp int64
}

// testRemoteIndex is a tier.RemoteIndex over fixed segments of "old"/0.
type testRemoteIndex struct{ segments []tier.Segment }

func (x *testRemoteIndex) RemoteBounds(topic string, partition int32) (int64, int64, bool) {
	if topic != "old" || partition != 0 || len(x.segments) == 0 {
		return 0, 0, false
	}
	return x.segments[0].BaseOffset, x.segments[len(x.segments)-1].LastOffset, true
}

func (x *testRemoteIndex) SegmentFor(topic string, partition int32, offset int64) (tier.Segment, bool) {
	if topic != "old" || partition != 0 {
		return tier.Segment{}, false
	}
	i := sort.Search(len(x.segments), func(i int) bool { return x.segments[i].LastOffset >= offset })
	if i == len(x.segments) {
		return tier.Segment{}, false
	}
	return x.segments[i], true
}

func startRemoteFixture(t *testing.T, maxWait time.Duration) *remoteFixture {
	t.Helper()
	f := &remoteFixture{store: storetest.NewGated(t)}
	index := &testRemoteIndex{}
	side, err := tier.OpenReadSide(f.store, index, tier.ReadConfig{Cache: tier.CacheConfig{Bytes: 1 << 20}, Pool: tier.ReadPoolConfig{Threads: 2, MaxWait: maxWait}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(side.Close)
	f.cache = side.Cache
	f.tb = startBroker(t, withDeps(func(d *Deps) { d.RemoteIndex, d.RemoteReads = index, side.Pool }))
	f.tb.createTopic("old", 1, map[string]string{"segment.bytes": "1024"})
	f.tb.createTopic("new", 1, nil)
	c := dial(t, f.tb.addr)
	f.firstTimestamp = time.Now().UnixMilli() - 1000
	for i := range 40 {
		batch := plainBatch(fmt.Sprintf("old-%02d", i), "second")
		batch.timestamp = f.firstTimestamp + 10*int64(i)
		if rp := c.produceRaw(9, "old", 0, 1, makeBatch(t, batch), int32(i)); rp.ErrorCode != 0 {
			t.Fatalf("produce: %d", rp.ErrorCode)
		}
	}
	if rp := c.produceRaw(9, "new", 0, 1, makeBatch(t, plainBatch("new-0")), 100); rp.ErrorCode != 0 {
		t.Fatalf("produce: %d", rp.ErrorCode)
	}
	l := f.tb.partitionLog("old", 0)
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	f.end = l.EndOffset()
	for _, s := range l.Segments() {
		if s.Size == 0 {
			continue
		}
		seg := tier.Segment{BaseOffset: s.BaseOffset, LastOffset: s.NextOffset - 1, Size: s.Size, MaxTimestamp: s.MaxTimestamp, Key: fmt.Sprintf("old-0/%020d", s.BaseOffset)}
		for _, suffix := range []string{tier.LogSuffix, tier.IndexSuffix, tier.TimeIndexSuffix} {
			b, err := os.ReadFile(filepath.Join(l.Dir(), fmt.Sprintf("%020d%s", s.BaseOffset, suffix)))
			if err != nil {
				t.Fatal(err)
			}
			storetest.Put(t, f.store, seg.Key+suffix, b)
		}
		f.segments = append(f.segments, seg)
	}
	if len(f.segments) < 3 {
		t.Fatalf("%d closed segments; the test wants several", len(f.segments))
	}
	index.segments = f.segments
	f.localStart = f.segments[len(f.segments)-1].BaseOffset
	if err := l.AdvanceStartOffset(f.localStart); err != nil {
		t.Fatal(err)
	}
	return f
}

// A consumer reads a tiered partition from offset 0 across the boundary
// between remote and local segments: every record once, in order; the log
// start offset it is told is the remote start (KIP-405).
func TestFetchReadsAcrossTheTieredBoundary(t *testing.T) {
	t.Parallel()
	f := startRemoteFixture(t, 10*time.Second)
	c := dial(t, f.tb.addr)
	var values []string
	for offset, id := int64(0), int32(1); offset < f.end; id++ {
		resp := c.roundTrip(fetchRequest(12, 0, 1, 1<<20, fetchPart{topic: "old", offset: offset, maxBytes: 300}), id).(*kmsg.FetchResponse)
		sp := resp.Topics[0].Partitions[0]
		if sp.ErrorCode != 0 || sp.LogStartOffset != 0 || len(sp.RecordBatches) == 0 {
			t.Fatalf("fetch at %d: error %d, log start %d, %d bytes", offset, sp.ErrorCode, sp.LogStartOffset, len(sp.RecordBatches))
		}
		for _, h := range batchesIn(t, sp.RecordBatches) {
			if h.BaseOffset > offset {
				t.Fatalf("fetch at %d skipped to %d", offset, h.BaseOffset)
			}
			if next := h.LastOffset() + 1; next > offset {
				offset = next
			}
		}
		values = append(values, recordValues(t, sp.RecordBatches)...)
	}
	if len(values) != 80 || values[0] != "old-00" || values[78] != "old-39" {
		t.Errorf("read %d records, first %q; want old-00 to old-39, two each", len(values), values[0])
	}
	if s := f.cache.Stats(); s.Fetches == 0 {
		t.Errorf("nothing was read from the store: %+v", s)
	}
	// Below the remote start is out of range, as below any log start.
	resp := c.roundTrip(fetchRequest(12, 0, 1, 1<<20, fetchPart{topic: "old", offset: -1, maxBytes: 300}), 999).(*kmsg.FetchResponse)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != 1 {
		t.Errorf("fetch at -1: error %d; want OFFSET_OUT_OF_RANGE", code)
	}
}

// recordValues decodes the values of the records in uncompressed batches.
func recordValues(t *testing.T, records []byte) []string {
	t.Helper()
	var out []string
	for len(records) > 0 {
		var b kmsg.RecordBatch
		if err := b.ReadFrom(records); err != nil {
			t.Fatal(err)
		}
		raw := b.Records
		for range b.NumRecords {
			var r kmsg.Record
			if err := r.ReadFrom(raw); err != nil {
				t.Fatal(err)
			}
			out = append(out, string(r.Value))
			raw = raw[len(r.AppendTo(nil)):]
		}
		records = records[12+int(b.Length):]
	}
	return out
}

// ListOffsets of a tiered partition: earliest is the remote start,
// earliest-local (-4, v8+, KIP-405) the local log start, latest-tiered
// (-5, v9+, KIP-1005) the last remote offset and earliest-pending-upload
// (-6, v11+, KIP-1023) the offset after it. A partition with no remote
// segments answers as without tiered storage.
func TestListOffsetsOfATieredPartition(t *testing.T) {
	t.Parallel()
	f := startRemoteFixture(t, 10*time.Second)
	c := dial(t, f.tb.addr)
	last := f.segments[len(f.segments)-1].LastOffset
	for i, tc := range []struct {
		topic     string
		timestamp int64
		want      int64
	}{
		{"old", listEarliest, 0},
		{"old", listEarliestLocal, f.localStart},
		{"old", listLatestTiered, last},
		{"old", listEarliestPending, last + 1},
		{"old", listLatest, f.end},
		{"new", listEarliest, 0},
		{"new", listEarliestLocal, 0},
		{"new", listLatestTiered, -1},
		{"new", listEarliestPending, -1},
	} {
		req := kmsg.NewPtrListOffsetsRequest()
		req.SetVersion(11)
		req.ReplicaID = -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = tc.topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp, rp.CurrentLeaderEpoch = tc.timestamp, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		sp := c.roundTrip(req, int32(i+1)).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
		if sp.ErrorCode != 0 || sp.Offset != tc.want {
			t.Errorf("%s at %d: offset %d, error %d; want %d", tc.topic, tc.timestamp, sp.Offset, sp.ErrorCode, tc.want)
		}
	}
}

// A remote read that does not complete holds neither the local partition
// of the same Fetch nor the Fetch pipelined after it on the connection
// longer than remote.fetch.max.wait.ms: both are answered with the local
// records while the store still answers nothing, the remote partition
// without records and without an error. Once the store answers, the read
// that went on in the background serves the next Fetch.
func TestRemoteFetchDoesNotHoldTheLocalTail(t *testing.T) {
	t.Parallel()
	f := startRemoteFixture(t, 100*time.Millisecond)
	release := f.store.Hold()
	defer release()
	c := dial(t, f.tb.addr)
	mixed := fetchRequest(12, 10*time.Second, 1, 1<<20, fetchPart{topic: "old", offset: 0, maxBytes: 1 << 20}, fetchPart{topic: "new", offset: 0, maxBytes: 1 << 20})
	local := fetchRequest(12, 10*time.Second, 1, 1<<20, fetchPart{topic: "new", offset: 0, maxBytes: 1 << 20})
	c.send(frame(mixed, 1))
	c.send(frame(local, 2))
	resp := c.readResponse(mixed, 1).(*kmsg.FetchResponse)
	old, fresh := resp.Topics[0].Partitions[0], resp.Topics[1].Partitions[0]
	if old.ErrorCode != 0 || len(old.RecordBatches) != 0 || old.LogStartOffset != 0 {
		t.Errorf("remote partition while the store is down: error %d, %d bytes, log start %d; want no error, no records, log start 0", old.ErrorCode, len(old.RecordBatches), old.LogStartOffset)
	}
	if got := recordValues(t, fresh.RecordBatches); len(got) != 1 || got[0] != "new-0" {
		t.Errorf("local partition of the same fetch: %q", got)
	}
	resp = c.readResponse(local, 2).(*kmsg.FetchResponse)
	if got := recordValues(t, resp.Topics[0].Partitions[0].RecordBatches); len(got) != 1 || got[0] != "new-0" {
		t.Errorf("pipelined local fetch: %q", got)
	}
	release()
	resp = c.roundTrip(fetchRequest(12, 10*time.Second, 1, 1<<20, fetchPart{topic: "old", offset: 0, maxBytes: 1 << 20}), 3).(*kmsg.FetchResponse)
	// The first Fetch's read may still be finishing; this one waits for
	// its own (or joins the chunks in flight) up to the 100 ms.
	for id := int32(4); len(resp.Topics[0].Partitions[0].RecordBatches) == 0 && id < 200; id++ {
		resp = c.roundTrip(fetchRequest(12, 10*time.Second, 1, 1<<20, fetchPart{topic: "old", offset: 0, maxBytes: 1 << 20}), id).(*kmsg.FetchResponse)
	}
	if got := recordValues(t, resp.Topics[0].Partitions[0].RecordBatches); len(got) == 0 || got[0] != "old-00" {
		t.Errorf("after the store came back: %q", got)
	}
}

// A segment both uploaded and still local lists its aborts in both
// transaction indexes: a read_committed answer names each once.
func TestMergeAbortedDropsDuplicates(t *testing.T) {
	t.Parallel()
	a := log.AbortedTxn{ProducerID: 1, FirstOffset: 3, LastOffset: 9, LastStableOffset: 10}
	b := log.AbortedTxn{ProducerID: 2, FirstOffset: 12, LastOffset: 20, LastStableOffset: 21}
	got := mergeAborted([]log.AbortedTxn{a}, []log.AbortedTxn{a, b})
	if len(got) != 2 || got[0] != a || got[1] != b {
		t.Errorf("merged %v; want %v and %v", got, a, b)
	}
}

// franz-go, starting at the earliest offset (ListOffsets -2: the remote
// start), consumes a tiered partition whole: the remote segments, then the
// local tail, every record once and in order.
func TestFranzGoConsumesATieredPartition(t *testing.T) {
	t.Parallel()
	f := startRemoteFixture(t, 10*time.Second)
	cl := newClient(t, f.tb.addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"old": {0: kgo.NewOffset().AtStart()}}))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var values []string
	var offsets []int64
	for len(values) < 80 && ctx.Err() == nil {
		fetches := cl.PollFetches(ctx)
		fetches.EachRecord(func(r *kgo.Record) {
			values = append(values, string(r.Value))
			offsets = append(offsets, r.Offset)
		})
	}
	if len(values) != 80 {
		t.Fatalf("consumed %d records; want 80", len(values))
	}
	for i := range values {
		want := fmt.Sprintf("old-%02d", i/2)
		if i%2 == 1 {
			want = "second"
		}
		if values[i] != want || offsets[i] < 0 || (i > 0 && offsets[i] <= offsets[i-1]) {
			t.Fatalf("record %d: %q at offset %d; want %q after offset %d", i, values[i], offsets[i], want, offsets[max(i-1, 0)])
		}
	}
}
