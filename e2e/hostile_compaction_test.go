package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/internal/waitfor"
)

// TestHostileCompactionLargeKeys: one segment of zstd batches carrying
// 1,000 unique 512 KiB keys (512 MiB of keys in well under 1 MiB of
// segment) used to grow the cleaner's key map past 1 GiB, and the broker
// was OOM-killed on every restart as the cleaner began the same segment
// again. Now the map holds a 24-byte digest per key in a table bounded by
// log.cleaner.dedupe.buffer.size, checked at every record.
//
// What bounds memory here: the broker runs with GOMEMLIMIT=384MiB (a soft
// limit: the Go runtime collects harder as the heap nears it, as it would
// in a container sized for the broker), and the test asserts the hard
// figure, the process's peak resident set (VmHWM in /proc/<pid>/status,
// what a memory cgroup's OOM killer acts on), is under 512 MiB after the
// pass. A map of the keys themselves cannot fit under that, whatever
// GOMEMLIMIT says: the keys alone are 500 MiB.
//
// The topic raises millrace.compacted.max.key.bytes to let the keys in,
// as an operator could; with the default (64 KiB) such a key is refused
// with INVALID_RECORD, which the test checks too.
func TestHostileCompactionLargeKeys(t *testing.T) {
	t.Parallel()
	const (
		topic    = "bigkeys"
		keys     = 1000
		perBatch = 100 // 50 MiB decompressed, under millrace.max.decompressed.bytes
		keyBytes = 512 << 10
		rewrite  = 100 // keys written a second time
	)
	b := startBrokerEnv(t, []string{"GOMEMLIMIT=384MiB"}, "--set", "log.cleaner.backoff.ms=200")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	b.createTopic(t, topic, 1, map[string]*string{
		"cleanup.policy":                   kadm.StringPtr("compact"),
		"millrace.compacted.max.key.bytes": kadm.StringPtr(strconv.Itoa(1 << 20)),
	})
	b.createTopic(t, "smallkeys", 1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")})

	cl := b.client(t, kgo.ProducerBatchCompression(kgo.ZstdCompression()),
		kgo.ProducerBatchMaxBytes(60<<20), kgo.MaxBufferedBytes(128<<20), kgo.ProducerLinger(time.Second))
	key := func(i int) []byte {
		k := bytes.Repeat([]byte{'k'}, keyBytes)
		copy(k, fmt.Sprintf("key-%06d-", i))
		return k
	}
	produce := func(from, to int, value string) {
		t.Helper()
		var recs []*kgo.Record
		for i := from; i < to; i++ {
			recs = append(recs, &kgo.Record{Topic: topic, Key: key(i), Value: []byte(value)})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce keys %d-%d: %v", from, to, err)
		}
	}
	for from := 0; from < keys; from += perBatch {
		produce(from, from+perBatch, "v1")
	}
	produce(0, rewrite, "v2")

	// The default bound refuses such a key on a compacted topic.
	err := cl.ProduceSync(ctx, &kgo.Record{Topic: "smallkeys", Key: key(0), Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("a 512 KiB key with the default millrace.compacted.max.key.bytes: %v, want INVALID_RECORD", err)
	}

	// Roll the segment holding every key: shrink segment.bytes so the next
	// append does not fit, and append.
	adm := b.admin(t)
	alter, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "segment.bytes", Value: kadm.StringPtr("1024")}}, topic)
	if err == nil {
		_, err = alter.On(topic, nil)
	}
	if err != nil {
		t.Fatalf("alter segment.bytes: %v", err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte("roll"), Value: []byte("r")}).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}

	cleaned := regexp.MustCompile(`msg="cleaned log".* dir=` + topic + `-0 `)
	waitfor.Until(t, 2*time.Minute, "a cleaning pass over the large keys", func() bool {
		return cleaned.MatchString(b.log())
	})
	peak := peakRSSKiB(t, b.pid())
	t.Logf("broker peak RSS %d KiB", peak)
	if peak >= 512<<10 {
		t.Errorf("broker peak RSS %d KiB while cleaning 1,000 keys of 512 KiB, want under 512 MiB", peak)
	}

	// The latest value of each key is kept: v2 for the rewritten keys, v1
	// for the others, each once.
	end := endOffset(ctx, t, cl, topic)
	consumer := b.client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	got := map[string]string{}
	for next := int64(0); next < end; {
		fetches := consumer.PollFetches(ctx)
		if err := fetches.Err(); err != nil {
			t.Fatal(err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			next = r.Offset + 1
			name, _, _ := strings.Cut(string(r.Key), "-k")
			if _, dup := got[name]; dup {
				t.Errorf("key %s read twice, the second time at offset %d", name, r.Offset)
			}
			got[name] = string(r.Value)
		})
	}
	if len(got) != keys+1 {
		t.Fatalf("%d keys read, want %d and the roll record", len(got), keys)
	}
	for i := range keys {
		want := "v1"
		if i < rewrite {
			want = "v2"
		}
		if name := fmt.Sprintf("key-%06d", i); got[name] != want {
			t.Fatalf("%s: %q, want %q", name, got[name], want)
		}
	}
}

// startBrokerEnv is startBroker with env added to the broker's environment.
func startBrokerEnv(t *testing.T, env []string, extra ...string) *broker {
	t.Helper()
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	data := t.TempDir()
	args := append([]string{"broker", "--listen", addr, "--data", data, "--id", "1"}, extra...)
	p := startProcessOf(t, &process{t: t, name: "broker", bin: millraceBin, env: env, args: args})
	b := &broker{process: p, addr: addr, data: data}
	b.waitReady()
	return b
}
