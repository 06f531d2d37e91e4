package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/internal/waitfor"
)

// Issue 42's acceptance run: 200 MB through a tiered topic on S3.
const (
	tierS3Records    = 20_000
	tierS3ValueBytes = 10 << 10 // 20,000 x 10 KiB: 205 MB
)

// tierValue is the value of the record at offset: tierS3ValueBytes of a
// ChaCha8 stream keyed by the SHA-256 of the offset, deterministic (so a
// reader checks every value from its offset alone) and incompressible (so
// the bytes on disk and in the bucket are the bytes produced).
func tierValue(offset int64) []byte {
	seed := sha256.Sum256(binary.BigEndian.AppendUint64([]byte("millrace tier e2e "), uint64(offset)))
	v := make([]byte, tierS3ValueBytes)
	rand.NewChaCha8(seed).Read(v)
	return v
}

// TestTieredTopicOnS3: a broker process with its remote storage in a
// versitygw bucket, and a topic with 4 MiB segments and local.retention.ms
// of 2 s, takes 200 MB from an acks=all producer; every closed segment is
// uploaded and deleted locally, so the partition directory holds only the
// tail, and ListOffsets answers earliest 0 (the remote start) and
// earliest-local (KIP-1005) the local start. Then a new franz-go consumer
// group and kcat each read every record from offset 0, in order, each
// value checked against its offset, through the broker's remote reads;
// and kcat started at the timestamp of a remote record (ListOffsets by
// timestamp, searched in the remote segments) starts at that record or at
// an earlier one of the same millisecond.
func TestTieredTopicOnS3(t *testing.T) {
	t.Parallel()
	const topic, bucket = "tiered", "tier"
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s3 := startVersitygw(t)
	s3.newBucket(t, ctx, bucket)
	metricsAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	b := startBrokerEnv(t, []string{"AWS_ACCESS_KEY_ID=" + s3AccessKey, "AWS_SECRET_ACCESS_KEY=" + s3SecretKey},
		"--metrics-listen", metricsAddr,
		"--set", "remote.log.storage.system.enable=true",
		"--set", "millrace.remote.storage.url=s3://"+bucket+"/segments",
		"--set", "millrace.remote.storage.s3.endpoint="+s3.endpoint(),
		"--set", "millrace.remote.storage.s3.region=us-east-1",
		"--set", "remote.log.manager.task.interval.ms=200",
		"--set", "log.retention.check.interval.ms=200",
		// Deleted segments' files stay this long (Kafka's default: a minute).
		"--set", "log.segment.delete.delay.ms=500")
	b.createTopic(t, topic, 1, map[string]*string{
		"remote.storage.enable": kadm.StringPtr("true"),
		"segment.bytes":         kadm.StringPtr(strconv.Itoa(4 << 20)),
		"local.retention.ms":    kadm.StringPtr("2000"),
	})

	produceTierValues(t, ctx, b, topic)

	// Every closed segment remote, and deleted locally: the local log
	// starts right after the last remote offset, in its only segment.
	local := filepath.Join(b.data, "logs", topic+"-0")
	adm := b.client(t)
	var localStart, disk int64
	waitfor.Until(t, 90*time.Second, "every closed segment remote and only the tail local", func() bool {
		lastTiered := listOffset(t, ctx, adm, topic, -5)
		localStart = listOffset(t, ctx, adm, topic, -4)
		return lastTiered > 0 && localStart == lastTiered+1 && len(localSegments(t, local)) == 1
	})
	waitfor.Until(t, 10*time.Second, "the deleted segments' files removed", func() bool {
		disk = diskBytes(t, local)
		return disk <= tierS3Records*tierS3ValueBytes/20
	})
	if earliest := listOffset(t, ctx, adm, topic, -2); earliest != 0 || localStart <= 0 {
		t.Fatalf("ListOffsets earliest %d, earliest-local %d; want 0 and above 0", earliest, localStart)
	}

	t.Logf("remote below offset %d; %d bytes on local disk", localStart, disk)
	consumer := b.client(t, kgo.ConsumerGroup("tier-readers"), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxPartitionBytes(8<<20))
	var wg sync.WaitGroup
	wg.Go(func() { consumeTierValues(t, ctx, consumer) })
	wg.Go(func() { kcatTierValues(t, ctx, b, topic) })
	wg.Wait()
	if t.Failed() {
		return
	}
	mid := localStart / 2
	_, ts := kcatRecordAt(t, ctx, b, topic, strconv.FormatInt(mid, 10))
	if offset, found := kcatRecordAt(t, ctx, b, topic, "s@"+strconv.FormatInt(ts, 10)); offset > mid || found != ts {
		t.Fatalf("kcat -o s@%d (the timestamp of offset %d, below the local start %d) started at offset %d, timestamp %d", ts, mid, localStart, offset, found)
	}
	metrics := "http://" + metricsAddr + "/metrics"
	if misses := scrapeCounter(t, metrics, "millrace_remote_fetch_cache_misses_total"); misses == 0 {
		t.Fatal("no chunk was read from the bucket")
	}
	if errs := scrapeCounter(t, metrics, "millrace_remote_read_errors_total"); errs != 0 {
		t.Fatalf("%v remote reads failed", errs)
	}
}

// produceTierValues writes tierValue(i) for i in [0, tierS3Records) with
// acks=all, each landing at offset i (the idempotent producer neither
// loses nor duplicates on a retry).
func produceTierValues(t *testing.T, ctx context.Context, b *broker, topic string) {
	t.Helper()
	cl := b.client(t, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.MaxBufferedBytes(32<<20))
	var (
		mu    sync.Mutex
		first error
	)
	for i := range int64(tierS3Records) {
		cl.Produce(ctx, &kgo.Record{Value: tierValue(i)}, func(r *kgo.Record, err error) {
			if err == nil && r.Offset != i {
				err = fmt.Errorf("record %d landed at offset %d", i, r.Offset)
			}
			if err != nil {
				mu.Lock()
				first = cmpErr(first, err)
				mu.Unlock()
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatalf("flushing the producer: %v", err)
	}
	if first != nil {
		t.Fatalf("produce: %v", first)
	}
}

// cmpErr keeps the first error.
func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// listOffset asks the partition's offset for a special timestamp (-2
// earliest, -4 earliest-local, -5 latest-tiered); -1 when it has none.
func listOffset(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, timestamp int64) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = 9
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = timestamp
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("ListOffsets %d: %v", timestamp, err)
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		t.Fatalf("ListOffsets %d: error %d", timestamp, p.ErrorCode)
	}
	return p.Offset
}

// diskBytes is what the files of dir take on disk (sparse preallocated
// indexes count only their written blocks).
func diskBytes(t *testing.T, dir string) int64 {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			continue // deleted meanwhile
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			total += st.Blocks * 512
		}
	}
	return total
}

// consumeTierValues reads with cl, a new group's consumer of the topic
// from offset 0, and checks every record's offset and value.
func consumeTierValues(t *testing.T, ctx context.Context, cl *kgo.Client) {
	for next := int64(0); next < tierS3Records; {
		fetches := cl.PollFetches(ctx)
		if err := fetches.Err(); err != nil {
			t.Errorf("franz-go consuming from offset %d: %v", next, err)
			return
		}
		for _, r := range fetches.Records() {
			if r.Offset != next || !bytes.Equal(r.Value, tierValue(next)) {
				t.Errorf("franz-go read offset %d (%d bytes) where offset %d was next, or its value differs", r.Offset, len(r.Value), next)
				return
			}
			next++
		}
	}
}

// kcatRecordAt reads one record of the topic with kcat from start (an
// offset, or s@<ms> for the first record at or after a timestamp) and
// returns its offset and timestamp.
func kcatRecordAt(t *testing.T, ctx context.Context, b *broker, topic, start string) (offset, timestamp int64) {
	t.Helper()
	cmd := exec.CommandContext(ctx, "kcat", "-C", "-b", b.addr, "-t", topic, "-p", "0", "-o", start, "-c", "1", "-q",
		"-X", "fetch.message.max.bytes=8388608", "-f", "%o %T\n")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kcat -o %s: %v\n%s", start, err, stderr.String())
	}
	if _, err := fmt.Sscanf(string(out), "%d %d\n", &offset, &timestamp); err != nil {
		t.Fatalf("kcat -o %s printed %q: %v", start, out, err)
	}
	return offset, timestamp
}

// kcatTierValues reads the topic from the beginning to its end with kcat,
// as "<offset> <size>\n<value>", and checks the count, the order and every
// value, and the SHA-256 of all values together.
func kcatTierValues(t *testing.T, ctx context.Context, b *broker, topic string) {
	cmd := exec.CommandContext(ctx, "kcat", "-C", "-b", b.addr, "-t", topic, "-o", "beginning", "-e", "-q",
		"-X", "fetch.message.max.bytes=8388608", "-f", "%o %S\n%s")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Error(err)
		return
	}
	if err := cmd.Start(); err != nil {
		t.Errorf("kcat: %v", err)
		return
	}
	got, want := sha256.New(), sha256.New()
	r := bufio.NewReaderSize(out, 1<<20)
	next := int64(0)
	for ; ; next++ {
		line, err := r.ReadString('\n')
		if err == io.EOF && line == "" {
			break
		}
		var offset, size int64
		if _, scanErr := fmt.Sscanf(line, "%d %d\n", &offset, &size); err != nil || scanErr != nil || size != tierS3ValueBytes {
			t.Errorf("kcat: record %d: header %q: %v %v", next, line, err, scanErr)
			break
		}
		value := make([]byte, size)
		if _, err := io.ReadFull(r, value); err != nil {
			t.Errorf("kcat: record %d: %v", next, err)
			break
		}
		expected := tierValue(next)
		if offset != next || !bytes.Equal(value, expected) {
			t.Errorf("kcat read offset %d where offset %d was next, or its value differs", offset, next)
			break
		}
		got.Write(value)
		want.Write(expected)
	}
	io.Copy(io.Discard, out)
	if err := cmd.Wait(); err != nil {
		t.Errorf("kcat: %v\n%s", err, stderr.String())
	}
	if next != tierS3Records || !bytes.Equal(got.Sum(nil), want.Sum(nil)) {
		t.Errorf("kcat read %d records (checksum %x), want %d (checksum %x)", next, got.Sum(nil), tierS3Records, want.Sum(nil))
	}
}
