package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/internal/waitfor"
)

// manyPartitions is a broker holding topics × partitions partitions of a few
// small segments each, for the start-up and descriptor measurements.
type manyPartitions struct {
	b                   *broker
	topics              []string
	partitions          int
	segments, valueSize int
}

// fillManyPartitions creates the topics with segment.bytes small enough that
// each of the segments records of every partition gets a segment of its own,
// and produces them.
func fillManyPartitions(t testing.TB, b *broker, topics, partitions, segments int) *manyPartitions {
	t.Helper()
	m := &manyPartitions{b: b, partitions: partitions, segments: segments, valueSize: 3000}
	adm := b.admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	segmentBytes := "4096" // one 3 KB batch per segment
	for i := range topics {
		name := fmt.Sprintf("many-%03d", i)
		m.topics = append(m.topics, name)
		resp, err := adm.CreateTopic(ctx, int32(partitions), 1, map[string]*string{"segment.bytes": &segmentBytes}, name)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
	}
	// One record per batch, so every batch rolls a segment.
	cl := b.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchMaxBytes(int32(m.valueSize+200)),
		kgo.MaxBufferedRecords(20_000), kgo.ProducerLinger(0))
	value := make([]byte, m.valueSize)
	for s := range segments {
		for _, topic := range m.topics {
			for p := range partitions {
				cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: int32(p), Value: value}, func(_ *kgo.Record, err error) {
					if err != nil {
						t.Errorf("produce %s/%d segment %d: %v", topic, p, s, err)
					}
				})
			}
		}
		if err := cl.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	return m
}

// servesAll reports whether the broker answers Metadata with a leader for
// every partition and ListOffsets with the end offset produced for each.
func (m *manyPartitions) servesAll(adm *kadm.Client) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	md, err := adm.Metadata(ctx, m.topics...)
	if err != nil {
		return false
	}
	for _, topic := range m.topics {
		td, ok := md.Topics[topic]
		if !ok || td.Err != nil || len(td.Partitions) != m.partitions {
			return false
		}
		for _, p := range td.Partitions {
			if p.Err != nil || p.Leader < 0 {
				return false
			}
		}
	}
	ends, err := adm.ListEndOffsets(ctx, m.topics...)
	if err != nil {
		return false
	}
	n := 0
	var bad error
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil || o.Offset != int64(m.segments) {
			bad = fmt.Errorf("%s/%d: end %d, err %v", o.Topic, o.Partition, o.Offset, o.Err)
		}
		n++
	})
	return bad == nil && n == len(m.topics)*m.partitions
}

// restartToServing stops the broker with sig, starts it again and returns
// how long the new process took from its start until it served every
// partition.
func (m *manyPartitions) restartToServing(t testing.TB, sig syscall.Signal) time.Duration {
	t.Helper()
	b := m.b
	if !b.stop(sig, 2*time.Minute) {
		t.Fatalf("broker did not stop on %v within 2 minutes", sig)
	}
	start := time.Now()
	b.start()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	waitfor.Until(t, 3*time.Minute, "the broker to serve every partition", func() bool {
		if m.servesAll(adm) {
			return true
		}
		b.exitedEarly("serving every partition")
		return false
	})
	return time.Since(start)
}

// procStatusKiB reads a "Name: N kB" line of /proc/<pid>/status.
func procStatusKiB(t testing.TB, pid int, name string) int {
	t.Helper()
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		var v int
		if _, err := fmt.Sscanf(line, name+": %d kB", &v); err == nil {
			return v
		}
	}
	t.Fatalf("no %s in /proc/%d/status", name, pid)
	return 0
}

// BenchmarkManyPartitionsRestart measures a broker of 100 topics × 100
// partitions of 3 segments each: the time from process start to serving
// every partition after a clean stop and after SIGKILL, and the idle
// resident set and open descriptors after each start. Run it alone:
//
//	go test -run '^$' -bench BenchmarkManyPartitionsRestart -benchtime 1x -timeout 30m ./e2e/
//
// MILLRACE_BENCH_TOPICS and MILLRACE_BENCH_PARTITIONS change the shape;
// with MILLRACE_BENCH_LATENCY=1 it then runs `millrace bench latency` with
// 10 producers over a further 1,000 partitions at 100,000 records/s.
func BenchmarkManyPartitionsRestart(b *testing.B) {
	topics, partitions := envInt("MILLRACE_BENCH_TOPICS", 100), envInt("MILLRACE_BENCH_PARTITIONS", 100)
	br := startBroker(b)
	m := fillManyPartitions(b, br, topics, partitions, 3)
	logs := filepath.Join(br.data, "logs")
	for b.Loop() {
		for _, c := range []struct {
			name string
			sig  syscall.Signal
		}{{"clean", syscall.SIGTERM}, {"sigkill", syscall.SIGKILL}} {
			d := m.restartToServing(b, c.sig)
			pid := br.pid()
			targets := fdTargets(b, pid)
			b.ReportMetric(d.Seconds(), c.name+"-restart-s")
			b.ReportMetric(float64(len(targets)), c.name+"-fds")
			b.ReportMetric(float64(countUnder(targets, logs)), c.name+"-log-fds")
			b.ReportMetric(float64(procStatusKiB(b, pid, "VmRSS"))/1024, c.name+"-rss-MiB")
		}
		// CPU the idle broker spends on its 10,000 partitions.
		before := processCPU(b, br.pid())
		time.Sleep(10 * time.Second)
		b.ReportMetric(float64(processCPU(b, br.pid())-before)/float64(10*time.Second)*100, "idle-cpu-%")
		if os.Getenv("MILLRACE_BENCH_LATENCY") != "" {
			// 10 producers over 1,000 partitions at a fixed rate, on the
			// broker holding every other partition.
			out := run(b, 10*time.Minute, "", millraceBin, "bench", "latency", "-b", br.addr, "--topic", "many-latency",
				"--partitions", "1000", "--producers", "10", "--rate", "100000", "--acks", "all",
				"--warmup", "10s", "--duration", "30s", "--quiet")
			b.Log("\n" + out)
			targets := fdTargets(b, br.pid())
			b.ReportMetric(float64(len(targets)), "after-latency-fds")
			b.ReportMetric(float64(procStatusKiB(b, br.pid(), "VmRSS"))/1024, "after-latency-rss-MiB")
		}
	}
}

// processCPU is the user and system CPU time process pid has used.
func processCPU(t testing.TB, pid int) time.Duration {
	t.Helper()
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the command name: state is field 3, utime 14, stime 15.
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("reading /proc/%d/stat: %v %v", pid, err1, err2)
	}
	const ticksPerSecond = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / ticksPerSecond
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// A broker of 1,000 partitions with a descriptor cache of 100 files holds
// at most 100 segment files open once filled, serves every partition after a
// restart, and stays within the bound after a consumer read every
// partition's old segment.
func TestManyPartitionsDescriptorBound(t *testing.T) {
	t.Parallel()
	const limit = 100
	b := startBroker(t, "--set", "millrace.log.max.open.files="+strconv.Itoa(limit))
	m := fillManyPartitions(t, b, 10, 100, 2)
	logs := filepath.Join(b.data, "logs")
	if n := countUnder(fdTargets(t, b.pid()), logs); n > limit {
		t.Fatalf("%d segment files open after filling %d partitions, bound %d", n, len(m.topics)*m.partitions, limit)
	}
	m.restartToServing(t, syscall.SIGTERM)
	if n := countUnder(fdTargets(t, b.pid()), logs); n > limit {
		t.Fatalf("%d segment files open after the restart, bound %d", n, limit)
	}

	cl := b.client(t, kgo.ConsumeTopics(m.topics...), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxBytes(1<<20))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	seen := map[string]int{}
	total, maxOpen := 0, 0
	for total < len(m.topics)*m.partitions*m.segments {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %d of %d records: %v", total, len(m.topics)*m.partitions*m.segments, err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if len(r.Value) != m.valueSize {
				t.Fatalf("%s/%d@%d: %d bytes, want %d", r.Topic, r.Partition, r.Offset, len(r.Value), m.valueSize)
			}
			seen[fmt.Sprintf("%s/%d", r.Topic, r.Partition)]++
			total++
		})
		maxOpen = max(maxOpen, countUnder(fdTargets(t, b.pid()), logs))
	}
	if len(seen) != len(m.topics)*m.partitions {
		t.Fatalf("read %d partitions, want %d", len(seen), len(m.topics)*m.partitions)
	}
	// A file in use is never closed under its reader, so the bound may be
	// passed by the few being read at the moment of a sample.
	if maxOpen > limit+16 {
		t.Fatalf("up to %d segment files open while reading every partition, bound %d", maxOpen, limit)
	}
	if n := countUnder(fdTargets(t, b.pid()), logs); n > limit {
		t.Fatalf("%d segment files open after reading every partition, bound %d", n, limit)
	}
}
