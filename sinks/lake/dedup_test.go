package lake

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/store"
)

func tailID(prefix string, offset int) string { return fmt.Sprintf("%016s%016x", prefix, offset) }

func uuidOf(n int) string { return fmt.Sprintf("0190a1b2-c3d4-7e5f-8a9b-%012d", n) }

func TestParseEventID(t *testing.T) {
	for _, c := range []struct {
		id   string
		kind idKind
	}{
		{tailID("00aa", 7), idTail},
		{strings.ToUpper(tailID("00aa", 10)), idNone}, // the tailer writes lower case
		{uuidOf(1), idUUID},
		{strings.ToUpper(uuidOf(1)), idUUID},
		{"0190a1b2c3d47e5f8a9b000000000001xyzw", idNone},
		{"e1", idNone},
		{"", idNone},
		{strings.Repeat("g", 32), idNone},
	} {
		if kind, _ := parseEventID(c.id); kind != c.kind {
			t.Errorf("%q: kind %d, want %d", c.id, kind, c.kind)
		}
	}
	_, a := parseEventID(uuidOf(1))
	_, b := parseEventID(strings.ToUpper(uuidOf(1)))
	if a != b {
		t.Error("a UUID in upper case is another id")
	}
}

// FuzzParseEventID checks the word-at-a-time decoding against
// encoding/hex and the definition of each shape.
func FuzzParseEventID(f *testing.F) {
	for _, id := range []string{tailID("00aa", 7), strings.ToUpper(tailID("00aa", 10)), uuidOf(1),
		strings.ToUpper(uuidOf(1)), "0190A1b2-C3d4-7e5F-8a9b-00000000000f", "0190a1b2c3d47e5f8a9b000000000001xyzw",
		"0190a1b2-c3d4-7e5f-8a9b-00000000000g", "0190a1b2-c3d4-7e5f-8a9b-00000000000\x80", strings.Repeat("g", 32),
		"0190a1b2-c3d4-7e5f-8a9b-00000000000:", "0190a1b2-c3d4-7e5f-8a9b-00000000000@", "0190a1b2-c3d4-7e5f-8a9b-00000000000`"} {
		f.Add(id)
	}
	f.Fuzz(func(t *testing.T, id string) {
		wantKind, wantBytes := idNone, []byte(nil)
		switch {
		case len(id) == 32 && strings.Trim(id, "0123456789abcdef") == "":
			wantKind, wantBytes = idTail, must(hex.DecodeString(id))
		case len(id) == 36 && id[8] == '-' && id[13] == '-' && id[18] == '-' && id[23] == '-':
			digits := id[:8] + id[9:13] + id[14:18] + id[19:23] + id[24:]
			if b, err := hex.DecodeString(digits); err == nil {
				wantKind, wantBytes = idUUID, b
			}
		}
		kind, got := parseEventID(id)
		if kind != wantKind || wantKind != idNone && !bytes.Equal(got[:], wantBytes) {
			t.Fatalf("%q: %d %x, want %d %x", id, kind, got, wantKind, wantBytes)
		}
	})
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestDeduperDecisions: each step reads a record (record time in minutes,
// an id) and says whether it is dropped.
func TestDeduperDecisions(t *testing.T) {
	type step struct {
		minute int
		id     string
		drop   bool
	}
	for _, c := range []struct {
		name   string
		maxIDs int
		steps  []step
	}{
		{"tail watermark", 100, []step{
			{0, tailID("a", 0), false}, {0, tailID("a", 10), false}, {1, tailID("a", 10), true},
			{1, tailID("a", 5), true}, {1, tailID("b", 5), false}, {2, tailID("a", 11), false}, {2, tailID("b", 5), true},
		}},
		{"tail re-sent range keeps the largest offset", 100, []step{
			{0, tailID("a", 100), false}, {1, tailID("a", 50), true}, {1, tailID("a", 60), true},
			{2, tailID("a", 100), true}, {2, tailID("a", 101), false},
		}},
		{"uuid within the window", 100, []step{
			{0, uuidOf(1), false}, {30, uuidOf(2), false}, {59, uuidOf(1), true}, {61, uuidOf(2), true},
			// minute 61: the first copy of 1 (minute 0) is forgotten, its
			// repeat at 59 (remembered too) is not.
			{61, uuidOf(1), true}, {120, uuidOf(1), true}, {181, uuidOf(1), false},
		}},
		{"record time going back does not turn the clock back", 100, []step{
			{60, uuidOf(1), false}, {0, uuidOf(2), false}, {61, uuidOf(2), true}, {121, uuidOf(2), false},
		}},
		{"tail watermark forgotten after the window", 100, []step{
			{0, tailID("a", 10), false}, {59, tailID("a", 9), true}, {120, tailID("a", 9), false},
		}},
		{"oldest forgotten first past max ids", 2, []step{
			{0, uuidOf(1), false}, {0, uuidOf(2), false}, {0, uuidOf(3), false},
			{0, uuidOf(1), false}, {0, uuidOf(3), true},
		}},
		{"no id passes", 100, []step{{0, "", false}, {0, "", false}, {0, "e1", false}, {0, "e1", false}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := newDeduper(time.Hour, c.maxIDs)
			for i, s := range c.steps {
				d.observe(base.Add(time.Duration(s.minute) * time.Minute))
				kind, id := parseEventID(s.id)
				if got := d.decide(kind, id); got != s.drop {
					t.Errorf("step %d (%+v): dropped %v", i, s, got)
				}
			}
		})
	}
}

// TestDeduperMatchesDefinition: over random records (few ids, so many
// repeats; time jumps, so the window forgets; caps around the table's
// growth steps, so the count forgets and the table grows and deletes in
// crowded runs), every decision is the one the definition gives, computed
// here by scanning the records it names, and the UUID table holds exactly
// the distinct UUIDs among them.
func TestDeduperMatchesDefinition(t *testing.T) {
	type entry struct {
		kind  idKind
		id    [16]byte
		clock int64
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, maxIDs := range []int{1, 2, 3, 7, 100, 1500} {
		d := newDeduper(time.Minute, maxIDs)
		var remembered []entry // oldest first
		var clock int64
		for step := range 6000 {
			clock = max(clock, base.UnixMilli()+int64(step)*5-int64(rng.IntN(1000)))
			if rng.IntN(1000) == 0 {
				clock += 50_000 // most of the window forgotten at once
			}
			var s string
			switch rng.IntN(10) {
			case 0:
				s = "e1"
			case 1, 2, 3:
				s = tailID(fmt.Sprint(rng.IntN(3)), rng.IntN(400))
			default:
				s = uuidOf(rng.IntN(4 * maxIDs))
			}
			kind, id := parseEventID(s)
			d.observe(time.UnixMilli(clock))
			for len(remembered) > 0 && remembered[0].clock <= clock-time.Minute.Milliseconds() {
				remembered = remembered[1:]
			}
			want := false
			for _, e := range remembered {
				want = want || kind == idUUID && e.kind == idUUID && e.id == id ||
					kind == idTail && e.kind == idTail && [8]byte(e.id[:8]) == [8]byte(id[:8]) && tailOffset(e.id) >= tailOffset(id)
			}
			if got := d.decide(kind, id); got != want {
				t.Fatalf("cap %d, step %d (%s): dropped %v, want %v", maxIDs, step, s, got, want)
			}
			if kind != idNone {
				remembered = append(remembered, entry{kind, id, clock})
				if len(remembered) > maxIDs {
					remembered = remembered[1:]
				}
			}
			distinct := map[[16]byte]bool{}
			for _, e := range remembered {
				if e.kind == idUUID {
					distinct[e.id] = true
				}
			}
			inTable := 0
			for _, s := range d.uuids {
				if s.pos != 0 {
					inTable++
				}
			}
			if d.n != len(remembered) || inTable != len(distinct) {
				t.Fatalf("cap %d, step %d: %d entries and %d UUIDs in the table, want %d and %d",
					maxIDs, step, d.n, inTable, len(remembered), len(distinct))
			}
		}
	}
}

// TestDeduperMemoryBound: 10^6 distinct ids through a deduper capped at
// 10^5 hold no more memory than the cap's worth, and the state keeps only
// the newest 10^5.
func TestDeduperMemoryBound(t *testing.T) {
	if testing.Short() {
		t.Skip("10^6 ids take seconds; the full run (make test, no -short) has it")
	}
	const maxIDs, n = 100_000, 1_000_000
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	ids := make([][16]byte, n)
	for i := range ids {
		_, ids[i] = parseEventID(uuidOf(i))
	}
	before := heap()
	d := newDeduper(time.Hour, maxIDs)
	var peak uint64
	for i, id := range ids {
		d.observe(base.Add(time.Duration(i) * time.Millisecond))
		if d.decide(idUUID, id) {
			t.Fatalf("distinct id %d dropped", i)
		}
		if i == maxIDs-1 || i%(n/4) == n/4-1 {
			peak = max(peak, heap()-before)
		}
	}
	perID := float64(peak) / maxIDs
	t.Logf("%d distinct ids, cap %d: %d entries, peak %d bytes (%.1f bytes per remembered id)", n, maxIDs, d.n, peak, perID)
	inTable := 0
	for _, s := range d.uuids {
		if s.pos != 0 {
			inTable++
		}
	}
	if d.n != maxIDs || inTable != maxIDs || len(d.ring) != maxIDs {
		t.Errorf("holds %d entries, %d ids, ring %d; want %d", d.n, inTable, len(d.ring), maxIDs)
	}
	// docs/settings.md and the DedupMaxIDs doc promise at most about 40 bytes per id.
	if perID > 40 {
		t.Errorf("%.1f bytes per remembered id, want at most 40", perID)
	}
	if !d.decide(idUUID, ids[n-1]) || d.decide(idUUID, ids[n-maxIDs-1]) {
		t.Error("the newest id is not remembered, or the one before the newest cap's worth is")
	}
	runtime.KeepAlive(ids)
}

// uuidClick is a click record with a UUID event id.
func uuidClick(offset int64, n int) *kgo.Record {
	r := click(offset, 0)
	r.Value = []byte(strings.Replace(string(r.Value), fmt.Sprintf(`"e%d"`, offset), `"`+uuidOf(n)+`"`, 1))
	return r
}

// TestDedupDropsAndNamesFiles: repeats are dropped inside a window and
// across windows, the first landed record of a bucket names its file, and
// the counts come back by source and hour.
func TestDedupDropsAndNamesFiles(t *testing.T) {
	root := t.TempDir()
	w, c, _ := testWorker(t, root, func(c *Config) { c.RollRows = 3 })
	// Offsets 0..6 with ids 1 1 2 3 2 4 5: offsets 1 and 4 are repeats.
	var recs []*kgo.Record
	for i, n := range []int{1, 1, 2, 3, 2, 4, 5} {
		recs = append(recs, uuidClick(int64(i), n))
	}
	recs = append(recs, click(7, 0)) // no UUID
	if err := feed(w, recs, 0); err != nil {
		t.Fatal(err)
	}
	if err := flushAll(w); err != nil {
		t.Fatal(err)
	}
	// Files by their first offset (the name may carry more after it).
	got := map[string][]string{}
	for name, ids := range landed(t, root) {
		got[name[:strings.Index(name, "part-0-")+len("part-0-")+20]] = ids
	}
	want := map[string][]string{
		"clicks/dt=2024-05-01/hr=10/part-0-00000000000000000000": {uuidOf(1), uuidOf(2), uuidOf(3)},
		"clicks/dt=2024-05-01/hr=10/part-0-00000000000000000005": {uuidOf(4), uuidOf(5), "e7"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("files:\n got %v\nwant %v", got, want)
	}
	if strings.Join(c.log, " ") != "clicks/0@4 clicks/0@8" {
		t.Errorf("commits: %v", c.log)
	}
	if got := prometheusValue(w.metrics.duplicates); got != 2 {
		t.Errorf("millrace_lake_duplicates_dropped_total = %v, want 2", got)
	}
	if got := prometheusValue(w.metrics.withoutID); got != 1 {
		t.Errorf("millrace_lake_records_without_id_total = %v, want 1", got)
	}

	// By source and hour, in the window, for the audit.
	w, _, _ = testWorker(t, t.TempDir(), nil)
	if err := feed(w, recs, 0); err != nil {
		t.Fatal(err)
	}
	counts := w.parts[topicPartition{"clicks", 0}].win.dedup
	if len(counts) != 1 || *counts[dedupKey{"-", "2024-05-01T10"}] != [2]int64{2, 1} {
		t.Errorf("window counts %v, want 2 repeats and 1 without id for source - at 2024-05-01T10", counts)
	}
}

// TestDedupPrefetchMatchesOneByOne: records delivered in fetches, whose ids
// prefetch reads ahead (repeats inside a span and across spans, an id the
// event does not begin with, an undecodable record, a fetch delivered
// again), land exactly as when each is decided alone, at caps that make
// every record evict (prefetch loads the evicted entries' slots too).
func TestDedupPrefetchMatchesOneByOne(t *testing.T) {
	var recs []*kgo.Record
	for i := range 100 {
		id := func(i int) int { return i%23 + i/60*7 } // repeats 23 apart; more from offset 60
		r := uuidClick(int64(i), id(i))
		if i%11 == 3 {
			r = uuidClick(int64(i), id(i-1)) // and right after
		}
		switch i % 17 {
		case 5:
			r.Value = []byte(fmt.Sprintf(`{"type":"click","event_id":%q,"ts":"2024-05-01T10:00:00Z"}`, uuidOf(i%23)))
		case 9:
			r.Value = nil // dead-lettered
		}
		recs = append(recs, r)
	}
	for _, maxIDs := range []int{1, 2, 10, 1000} {
		configure := func(c *Config) { c.RollRows, c.DedupMaxIDs = 1000, maxIDs }
		oneRoot, fetchRoot := t.TempDir(), t.TempDir()
		one, _, _ := testWorker(t, oneRoot, configure)
		if err := feed(one, recs, 0); err != nil {
			t.Fatal(err)
		}
		fetched, _, _ := testWorker(t, fetchRoot, configure)
		// Fetches of 37, 40 (the last 10 of the first again) and the rest.
		for _, span := range [][2]int{{0, 37}, {27, 67}, {67, 100}} {
			f := kgo.FetchPartition{Partition: 0, Records: recs[span[0]:span[1]]}
			if err := fetched.handle(context.Background(), kgo.Fetches{{Topics: []kgo.FetchTopic{{Topic: "clicks",
				Partitions: []kgo.FetchPartition{f}}}}}); err != nil {
				t.Fatal(err)
			}
		}
		for _, w := range []*Worker{one, fetched} {
			if err := flushAll(w); err != nil {
				t.Fatal(err)
			}
		}
		want, got := fmt.Sprint(landed(t, oneRoot)), fmt.Sprint(landed(t, fetchRoot))
		if got != want || !strings.Contains(want, uuidOf(1)) {
			t.Errorf("cap %d: landed from fetches\n%s\none by one\n%s", maxIDs, got, want)
		}
		if a, b := prometheusValue(fetched.metrics.duplicates), prometheusValue(one.metrics.duplicates); a != b || b == 0 {
			t.Errorf("cap %d: %v repeats dropped from fetches, %v one by one", maxIDs, a, b)
		}
	}
}

// prometheusValue is the value of c's series for topic clicks.
func prometheusValue(c *prometheus.CounterVec) float64 {
	return testutil.ToFloat64(c.WithLabelValues("clicks"))
}

// TestDedupRestartedWorkerDropsTheSame: with an in-process broker, a
// worker that stops after landing part of a partition and a new worker that
// lands the rest drop exactly the repeats, and land the same files, as one
// worker that never stopped.
func TestDedupRestartedWorkerDropsTheSame(t *testing.T) {
	addr, _ := startBroker(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("clicks"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "clicks"); err != nil {
		t.Fatal(err)
	}
	produce := func(from int64, ids ...int) {
		t.Helper()
		for i, n := range ids {
			r := uuidClick(from+int64(i), n)
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: r.Value, Timestamp: r.Timestamp}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitCommitted := func(w *Worker, group string, at int64) {
		t.Helper()
		adm := kadm.NewClient(w.client)
		for {
			offsets, err := adm.FetchOffsets(ctx, group)
			if o, ok := offsets.Lookup("clicks", 0); err == nil && ok && o.At == at {
				return
			}
			select {
			case <-w.Done():
				t.Fatalf("the worker stopped: %v", w.Err())
			case <-ctx.Done():
				t.Fatalf("%s never committed offset %d: %v %v", group, at, offsets, err)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	start := func(group, root string) *Worker {
		t.Helper()
		st, err := store.NewFile(root, nil)
		if err != nil {
			t.Fatal(err)
		}
		w, err := New(Config{Brokers: []string{addr}, Group: group, Topics: []string{"clicks"}, Schema: "click",
			RollRows: 2, IdleTimeout: 100 * time.Millisecond, SuccessGrace: -1, SessionTimeout: 6 * time.Second},
			st, prometheus.NewRegistry(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Start(ctx); err != nil {
			t.Fatal(err)
		}
		return w
	}
	// The repeats of 1 and 3 come after the restart; 2's within the first part.
	first := []int{1, 2, 3, 2, 4}
	second := []int{1, 5, 3, 6}
	produce(0, first...)

	restartedRoot, liveRoot := t.TempDir(), t.TempDir()
	w1 := start("restarted", restartedRoot)
	live := start("live", liveRoot)
	defer live.Shutdown(context.Background())
	waitCommitted(w1, "restarted", 5)
	if err := w1.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	produce(5, second...)
	w2 := start("restarted", restartedRoot)
	defer w2.Shutdown(context.Background())
	waitCommitted(w2, "restarted", 9)
	waitCommitted(live, "live", 9)

	ids := func(root string) []string {
		var out []string
		for name, file := range landed(t, root) {
			out = append(out, name[strings.LastIndex(name, "/")+1:]+":"+strings.Join(file, ","))
		}
		sort.Strings(out)
		return out
	}
	restarted, never := ids(restartedRoot), ids(liveRoot)
	if fmt.Sprint(restarted) != fmt.Sprint(never) {
		t.Errorf("restarted worker landed\n%v\nthe worker that never stopped\n%v", restarted, never)
	}
	var all []string
	for _, f := range restarted {
		all = append(all, strings.Split(f[strings.Index(f, ":")+1:], ",")...)
	}
	sort.Strings(all)
	want := []string{uuidOf(1), uuidOf(2), uuidOf(3), uuidOf(4), uuidOf(5), uuidOf(6)}
	if fmt.Sprint(all) != fmt.Sprint(want) {
		t.Errorf("landed %v, want each of %v once", all, want)
	}
	if got := testCounterValue(t, w2.metrics.reg.(*prometheus.Registry), "millrace_lake_duplicates_dropped_total"); got != 2 {
		t.Errorf("the restarted worker dropped %v repeats, want 2", got)
	}
}

// TestDedupReplaySkipsWhatTheWorkerSkips: the rebuild's read of a partition
// with an undecodable batch between good records delivers the records on
// both sides of it, as the group's client does, and stops before the
// offset it was asked to stop at.
func TestDedupReplaySkipsWhatTheWorkerSkips(t *testing.T) {
	dataDir := t.TempDir()
	addr, stop := startBroker(t, dataDir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	produce := func(addr string, offsets ...int64) {
		t.Helper()
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("clicks"))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		for _, o := range offsets {
			r := uuidClick(o, int(o))
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: r.Value, Timestamp: r.Timestamp}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	admin, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kadm.NewClient(admin).CreateTopic(ctx, 1, 1, nil, "clicks"); err != nil {
		t.Fatal(err)
	}
	admin.Close()
	produce(addr, 0, 1)
	stop()
	junk := junkBatch(0, 3, kgo.CodecZstd, []byte("junk where zstd frames belong"))
	if at := appendBatchToLog(t, filepath.Join(dataDir, "logs", "clicks-0"), junk); at != 2 {
		t.Fatalf("the junk batch went to offset %d, want 2", at)
	}
	addr, _ = startBroker(t, dataDir)
	produce(addr, 5, 6, 7)

	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	decompressor, err := boundedDecompressor(DefaultMaxDecompressedBatchBytes)
	if err != nil {
		t.Fatal(err)
	}
	h := &kgoHistory{client: cl, group: "g", reader: &kgoBatchReader{client: cl, decompressor: decompressor}, decompressor: decompressor}
	var got []int64
	if err := h.replay(ctx, topicPartition{"clicks", 0}, time.UnixMilli(0), 7, func(r *kgo.Record) {
		got = append(got, r.Offset)
	}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[0 1 5 6]" {
		t.Errorf("replayed offsets %v, want [0 1 5 6]", got)
	}
}

// TestDedupMaxIDsValidated: a cap past what 32-bit ring positions hold is
// refused.
func TestDedupMaxIDsValidated(t *testing.T) {
	c := Config{Brokers: []string{"x"}, Group: "g", Topics: []string{"a"}, Schema: "click", DedupMaxIDs: maxDedupIDs}
	if err := c.Validate(); err != nil {
		t.Fatalf("dedup_max_ids %d: %v", c.DedupMaxIDs, err)
	}
	c.DedupMaxIDs++
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "dedup_max_ids") {
		t.Errorf("dedup_max_ids %d: got %v, want an error naming dedup_max_ids", c.DedupMaxIDs, err)
	}
}

// TestNoIDCountedInItsWindow: a row without an id that starts a new window
// (here by roll age) is counted in that window, which commits it, not in
// the window the cut ended: a crash after the earlier window's commit
// would otherwise count it twice.
func TestNoIDCountedInItsWindow(t *testing.T) {
	w, c, _ := testWorker(t, t.TempDir(), func(c *Config) { c.RollAge = time.Minute })
	if err := feed(w, []*kgo.Record{click(0, 0), click(100, 0)}, 0); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(c.log) != "[clicks/0@1]" {
		t.Fatalf("commits %v, want the age cut before offset 100", c.log)
	}
	if got := prometheusValue(w.metrics.withoutID); got != 1 {
		t.Errorf("the landed window counted %v rows without id, want 1", got)
	}
	counts := w.parts[topicPartition{"clicks", 0}].win.dedup
	if len(counts) != 1 || *counts[dedupKey{"-", "2024-05-01T10"}] != [2]int64{0, 1} {
		t.Errorf("open window counts %v, want its one row without id", counts)
	}
}
