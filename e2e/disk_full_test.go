package e2e

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"

	"millrace/internal/waitfor"
)

// TestDiskFullRecoversWithoutRestart runs a broker whose data directory is
// a small tmpfs the test mounts. Once the volume is full, produce gets
// KAFKA_STORAGE_ERROR, reads go on, and the metrics and `millrace cluster
// status` show the partition refusing appends; once a file is deleted,
// produce succeeds again with no restart, and every acknowledged record
// is still there, in order.
func TestDiskFullRecoversWithoutRestart(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root; CI runs as root, so this runs there")
	}
	volume := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", volume).CombinedOutput(); err != nil {
		t.Fatalf("mount tmpfs: %v\n%s", err, out)
	}
	// Registered before the broker's own cleanup, so it runs after the
	// broker stopped.
	t.Cleanup(func() {
		if out, err := exec.Command("umount", volume).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v\n%s", volume, err, out)
		}
	})
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	metricsAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	data := filepath.Join(volume, "data")
	b := &broker{process: startProcess(t, "broker", "broker", "--listen", addr, "--data", data, "--id", "1",
		"--metrics-listen", metricsAddr), addr: addr, data: data}
	b.waitReady()
	pid := b.pid()
	metrics := "http://" + metricsAddr + "/metrics"
	const topic = "full"
	b.createTopic(t, topic, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Produce v9 (names, not topic IDs) straight to the broker, so each
	// answer's error code is seen as sent, without client retries.
	direct := b.client(t, kgo.MaxVersions(kversion.V3_0_0())).Broker(1)
	var acked []string
	produce := func(value string) int16 {
		code := produceRaw(ctx, t, direct, topic, forgedBatch(0, 0, 1, time.Now().UnixMilli(), recordWithValue(value)))
		if code == 0 {
			acked = append(acked, value)
		}
		return code
	}
	// Values larger than a page, so an append always needs a new one.
	big := func(n int) string { return fmt.Sprintf("record-%03d-", n) + strings.Repeat("v", 6000) }
	for i := range 5 {
		if code := produce(big(i)); code != 0 {
			t.Fatalf("produce %d before the volume is full: %v", i, kerr.ErrorForCode(code))
		}
	}

	filler := filepath.Join(volume, "filler")
	fillVolume(t, filler)
	code := produce(big(100))
	if code != kerr.KafkaStorageError.Code {
		t.Fatalf("produce on a full volume: %v, want KAFKA_STORAGE_ERROR", kerr.ErrorForCode(code))
	}
	if got := readValuesInOrder(ctx, t, b, topic, len(acked)); !slices.Equal(got, acked) {
		t.Fatalf("reading while the volume is full: %d records, want the %d acknowledged", len(got), len(acked))
	}
	waitfor.Until(t, 20*time.Second, "the metrics to show the partition refusing appends", func() bool {
		return scrapeCounter(t, metrics, "millrace_broker_storage_error_partitions") == 1 &&
			scrapeCounter(t, metrics, "millrace_broker_offline_partitions") == 1
	})
	status := run(t, time.Minute, "", millraceBin, "cluster", "status", "-b", addr)
	if !strings.Contains(status, "partitions refusing appends (storage error): 1\n  full/0 (log on broker 1") {
		t.Fatalf("cluster status does not show full/0 refusing appends:\n%s", status)
	}
	if code := produce(big(101)); code != kerr.KafkaStorageError.Code {
		t.Fatalf("produce on a still full volume: %v, want KAFKA_STORAGE_ERROR", kerr.ErrorForCode(code))
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	waitfor.Until(t, 30*time.Second, "produce to succeed after space was freed", func() bool {
		return produce(big(200)) == 0
	})
	for i := 201; i < 204; i++ {
		if code := produce(big(i)); code != 0 {
			t.Fatalf("produce %d after recovery: %v", i, kerr.ErrorForCode(code))
		}
	}
	if b.pid() != pid {
		t.Fatal("the broker restarted")
	}
	waitfor.Until(t, 20*time.Second, "the metrics to show no partition refusing appends", func() bool {
		return scrapeCounter(t, metrics, "millrace_broker_storage_error_partitions") == 0 &&
			scrapeCounter(t, metrics, "millrace_broker_offline_partitions") == 0
	})
	status = run(t, time.Minute, "", millraceBin, "cluster", "status", "-b", addr)
	if !strings.Contains(status, "partitions refusing appends (storage error): 0\n") {
		t.Fatalf("cluster status after recovery:\n%s", status)
	}
	if got := readValuesInOrder(ctx, t, b, topic, len(acked)); !slices.Equal(got, acked) {
		t.Fatalf("after recovery: read %d records, want the %d acknowledged in order", len(got), len(acked))
	}
	if !strings.Contains(b.log(), "log accepts appends again after a failed write") {
		t.Fatal("the broker did not log its recovery")
	}
}

// fillVolume writes path until the volume is full.
func fillVolume(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling the volume: %v", err)
			}
			return
		}
	}
}

// recordWithValue is a v2 record body: offset and timestamp delta 0, no
// key, the value, no headers.
func recordWithValue(value string) []byte {
	var body []byte
	body = append(body, 0)               // attributes
	body = binary.AppendVarint(body, 0)  // timestamp delta
	body = binary.AppendVarint(body, 0)  // offset delta
	body = binary.AppendVarint(body, -1) // no key
	body = binary.AppendVarint(body, int64(len(value)))
	body = append(body, value...)
	body = binary.AppendVarint(body, 0) // no headers
	return append(binary.AppendVarint(nil, int64(len(body))), body...)
}

// readValuesInOrder reads n records of partition 0 of topic from the start.
func readValuesInOrder(ctx context.Context, t *testing.T, b *broker, topic string, n int) []string {
	t.Helper()
	cl := b.client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer cl.Close()
	readCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var out []string
	for len(out) < n {
		fs := cl.PollFetches(readCtx)
		if err := readCtx.Err(); err != nil {
			t.Fatalf("read %d of %d records: %v", len(out), n, err)
		}
		fs.EachRecord(func(r *kgo.Record) { out = append(out, string(r.Value)) })
	}
	return out
}
