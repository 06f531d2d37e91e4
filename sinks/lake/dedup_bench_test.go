package lake

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkDedup is what dedup adds to landing one record: reading the id
// from the event and deciding, as the worker does (prefetching for the next
// records, then deciding each), for distinct UUIDs (every one remembered, in
// a state that grows to 200,000 ids and starts again; "uuid-full": at a cap
// of 100,000, so each one also forgets the oldest), for one file's tail
// ids, and for events without an id.
func BenchmarkDedup(b *testing.B) {
	const n = 200_000
	clicks, _ := benchClicks(n)
	tails := make([]*kgo.Record, n)
	noIDs := make([]*kgo.Record, n)
	for i := range tails {
		tails[i] = &kgo.Record{Offset: int64(i), Timestamp: clicks[i].Timestamp,
			Value: []byte(`{"event_id":"` + tailID("9f86d081884c7d65", i*80) + `","ts":"2024-05-01T10:00:00Z","host":"web-1","source":"/var/log/app.log","offset":0,"line":"x"}`)}
		noIDs[i] = click(int64(i), 0)
	}
	for _, c := range []struct {
		name   string
		schema string
		recs   []*kgo.Record
		maxIDs int
	}{
		{"uuid", "click", clicks, DefaultDedupMaxIDs},
		{"uuid-full", "click", clicks, n / 2},
		{"tail", "log", tails, DefaultDedupMaxIDs},
		{"none", "click", noIDs, DefaultDedupMaxIDs},
	} {
		b.Run(c.name, func(b *testing.B) {
			w, _, _ := testWorker(b, b.TempDir(), func(cfg *Config) { cfg.Schema = c.schema })
			row := w.schema.NewRow()
			for _, r := range c.recs {
				if err := row.Decode(r.Value); err != nil {
					b.Fatal(err)
				}
			}
			d := newDeduper(time.Hour, c.maxIDs)
			if c.maxIDs < n { // fill it: each id read next is forgotten by now
				for _, r := range c.recs {
					d.observe(r.Timestamp)
					d.decide(rowEventID(row, r.Value, ""))
				}
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				r := c.recs[i%n]
				if i%n == 0 && c.maxIDs >= n {
					d = newDeduper(time.Hour, c.maxIDs) // every id distinct again
				}
				d.prefetch(c.recs, i%n)
				d.observe(r.Timestamp)
				d.decideRecord(row, r)
			}
		})
	}
}

// BenchmarkDedupSet is the cost of the decision alone, for ids parsed
// beforehand: distinct UUIDs into a state that grows to 200,000 ids and
// starts again ("grow"), or that is full at 100,000 so each one also
// forgets the oldest ("full").
func BenchmarkDedupSet(b *testing.B) {
	const n = 200_000
	ids := make([][16]byte, n)
	for i := range ids {
		_, ids[i] = parseEventID(uuidOf(i))
	}
	for _, c := range []struct {
		name   string
		maxIDs int
	}{{"grow", DefaultDedupMaxIDs}, {"full", n / 2}} {
		b.Run(c.name, func(b *testing.B) {
			d := newDeduper(time.Hour, c.maxIDs)
			for _, id := range ids[:min(n, c.maxIDs)] {
				d.decide(idUUID, id) // full: the ids read next are forgotten by then
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if i%n == 0 && c.maxIDs >= n {
					d = newDeduper(time.Hour, c.maxIDs) // every id distinct again
				}
				d.decide(idUUID, ids[i%n])
			}
		})
	}
}

// BenchmarkClicksDedupOverhead lands the clicks of BenchmarkClicksToParquet
// (snappy) with dedup off and on in turns, so that both see the same load
// from the rest of the machine, and reports the rows per CPU-second of each
// and their ratio (on / off). The records go through the worker's poll
// handling in fetches of benchFetchRecords, as the group's client delivers
// them (about 1 MiB of clicks, franz-go's default partition fetch size).
func BenchmarkClicksDedupOverhead(b *testing.B) {
	const n = 200_000
	recs, _ := benchClicks(n)
	dir := b.TempDir()
	newWorker := func(i int, dedup string) *Worker {
		w, _, _ := testWorker(b, filepath.Join(dir, fmt.Sprint(dedup, "-", i)), func(c *Config) {
			c.RollRows, c.Compression, c.Dedup = n, "snappy", dedup
		})
		return w
	}
	land := func(w *Worker) time.Duration {
		// Each from a collected heap: otherwise which of the two a cycle
		// (marking the 200,000 records) falls in decides more than dedup.
		runtime.GC()
		start := getUsage(b)
		if err := feedFetches(w, recs); err != nil {
			b.Fatal(err)
		}
		if err := flushAll(w); err != nil {
			b.Fatal(err)
		}
		return start.cpu(getUsage(b))
	}
	land(newWorker(-1, "off")) // warm-up
	var off, on time.Duration
	for i := 0; i < b.N; i++ {
		if i%2 == 0 { // alternate which goes first
			off += land(newWorker(i, "off"))
			on += land(newWorker(i, "on"))
		} else {
			on += land(newWorker(i, "on"))
			off += land(newWorker(i, "off"))
		}
	}
	offRate := float64(n*b.N) / off.Seconds()
	onRate := float64(n*b.N) / on.Seconds()
	b.ReportMetric(offRate, "off_rows/cpu-s")
	b.ReportMetric(onRate, "on_rows/cpu-s")
	b.ReportMetric(onRate/offRate, "on/off")
}

// benchFetchRecords is how many records feedFetches delivers in one fetch.
const benchFetchRecords = 1600

// feedFetches gives recs to w's poll handling, benchFetchRecords at a time.
func feedFetches(w *Worker, recs []*kgo.Record) error {
	w.mu.Lock()
	w.partitionLocked(topicPartition{"clicks", 0}) // assigned
	w.mu.Unlock()
	for len(recs) > 0 {
		n := min(benchFetchRecords, len(recs))
		f := kgo.FetchPartition{Partition: 0, Records: recs[:n]}
		fetches := kgo.Fetches{{Topics: []kgo.FetchTopic{{Topic: "clicks", Partitions: []kgo.FetchPartition{f}}}}}
		if err := w.handle(context.Background(), fetches); err != nil {
			return err
		}
		recs = recs[n:]
	}
	return nil
}
