package lake

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/broker"
	"millrace/store"
)

// startBroker runs a broker in this process over dir and returns its
// address and a function that stops it cleanly.
func startBroker(t testing.TB, dir string) (string, func()) {
	t.Helper()
	cfg := broker.DefaultConfig()
	cfg.DataDir, cfg.Kafka.Listener = dir, "127.0.0.1:0"
	b, err := broker.Open(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("broker: %v", err)
		}
	}
	t.Cleanup(stop)
	return b.Addr().String(), stop
}

// appendBatchToLog appends batch to the active segment of the partition log
// in dir, with the base offset set to the log's end and the last batch's
// leader epoch, and removes the clean-shutdown marker so that the broker's
// next start scans (and CRC-checks) the segment. It is how a batch the
// broker would refuse today got into a log: written by an older version, or
// by the disk. It returns the batch's base offset.
func appendBatchToLog(t *testing.T, dir string, batch []byte) int64 {
	t.Helper()
	segments, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil || len(segments) == 0 {
		t.Fatalf("no segment in %s: %v", dir, err)
	}
	sort.Strings(segments) // 20-digit base offsets
	active := segments[len(segments)-1]
	data, err := os.ReadFile(active)
	if err != nil {
		t.Fatal(err)
	}
	end, epoch := int64(0), int32(0)
	for pos := 0; pos+batchHeaderBytes <= len(data); {
		length := int(binary.BigEndian.Uint32(data[pos+batchLengthAt:]))
		base := int64(binary.BigEndian.Uint64(data[pos:]))
		end = base + int64(binary.BigEndian.Uint32(data[pos+23:])) + 1 // lastOffsetDelta
		epoch = int32(binary.BigEndian.Uint32(data[pos+12:]))
		pos += 12 + length
	}
	batch = append([]byte(nil), batch...)
	binary.BigEndian.PutUint64(batch, uint64(end))        // baseOffset: outside the CRC
	binary.BigEndian.PutUint32(batch[12:], uint32(epoch)) // partitionLeaderEpoch: outside the CRC
	f, err := os.OpenFile(active, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(batch); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, ".clean-shutdown")); err != nil {
		t.Fatal(err)
	}
	return end
}

// TestUndecodableBatchFromBroker: a zstd batch with junk inside (valid CRC)
// sits in a partition between good records. The sink dead-letters it once,
// lands the records on both sides of it and commits past the end.
func TestUndecodableBatchFromBroker(t *testing.T) {
	dataDir := t.TempDir()
	addr, stop := startBroker(t, dataDir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "clicks"); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	produceClicks(ctx, t, addr, 0, 1)
	stop()
	junk := junkBatch(0, 3, kgo.CodecZstd, []byte("junk where zstd frames belong"))
	if at := appendBatchToLog(t, filepath.Join(dataDir, "logs", "clicks-0"), junk); at != 2 {
		t.Fatalf("the junk batch went to offset %d, want 2", at)
	}
	addr, _ = startBroker(t, dataDir)
	produceClicks(ctx, t, addr, 5, 6)

	root := t.TempDir()
	st, err := store.NewFile(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	w, err := New(Config{Brokers: []string{addr}, Group: "g", Topics: []string{"clicks"}, Schema: "click",
		IdleTimeout: 100 * time.Millisecond, SuccessGrace: -1}, st, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer w.Shutdown(context.Background())

	adm := kadm.NewClient(w.client)
	for {
		offsets, err := adm.FetchOffsets(ctx, "g")
		if o, ok := offsets.Lookup("clicks", 0); err == nil && ok && o.At == 7 {
			break
		}
		select {
		case <-w.Done():
			t.Fatalf("the worker stopped: %v", w.Err())
		case <-ctx.Done():
			t.Fatalf("the group never committed offset 7: %v %v", offsets, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	var ids []string
	for _, file := range landed(t, root) {
		ids = append(ids, file...)
	}
	sort.Strings(ids)
	if strings.Join(ids, " ") != "e0 e1 e5 e6" {
		t.Errorf("landed %v, want e0 e1 e5 e6", ids)
	}

	dlq, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("clicks.dlq"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer dlq.Close()
	fetches := dlq.PollRecords(ctx, 10)
	if err := fetches.Err(); err != nil {
		t.Fatal(err)
	}
	recs := fetches.Records()
	if len(recs) != 1 {
		t.Fatalf("%d dead letters, want 1", len(recs))
	}
	var d DeadLetter
	if err := json.Unmarshal(recs[0].Value, &d); err != nil {
		t.Fatal(err)
	}
	if d.Reason != reasonUndecodableBatch || d.Topic != "clicks" || d.Partition != 0 || d.Offset != 2 ||
		d.LastOffset != 4 || d.BatchBytes != len(junk) || d.Compression != "zstd" || d.Records != 3 ||
		!strings.Contains(d.Error, "magic number mismatch") {
		t.Errorf("dead letter: %s", recs[0].Value)
	}
	if got := testCounterValue(t, reg, "millrace_lake_undecodable_batches_total"); got != 1 {
		t.Errorf("millrace_lake_undecodable_batches_total = %v", got)
	}
}

// testCounterValue sums a counter family of reg.
func testCounterValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() == name {
			for _, m := range f.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}
