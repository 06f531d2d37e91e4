package e2e

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"hash/crc32"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/sinks/lake"
)

// appendJunkBatch appends a zstd batch of claimed records whose payload is
// not zstd, under a valid CRC-32C, to the active segment of the partition
// log in dir, at the log's end offset and with the last batch's leader
// epoch. It removes the clean-shutdown marker, so the broker's next start
// scans (and CRC-checks) the segment as after a crash. The broker must be
// stopped. It returns the batch's base offset and size.
func appendJunkBatch(t *testing.T, dir string, records int32) (int64, int) {
	t.Helper()
	segments, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil || len(segments) == 0 {
		t.Fatalf("no segment in %s: %v", dir, err)
	}
	sort.Strings(segments) // named by 20-digit base offsets
	active := segments[len(segments)-1]
	data, err := os.ReadFile(active)
	if err != nil {
		t.Fatal(err)
	}
	// Walk the v2 batches: baseOffset int64 at 0, batchLength int32 at 8,
	// partitionLeaderEpoch int32 at 12, lastOffsetDelta int32 at 23.
	end, epoch := int64(0), int32(0)
	for pos := 0; pos+61 <= len(data); pos += 12 + int(binary.BigEndian.Uint32(data[pos+8:])) {
		end = int64(binary.BigEndian.Uint64(data[pos:])) + int64(binary.BigEndian.Uint32(data[pos+23:])) + 1
		epoch = int32(binary.BigEndian.Uint32(data[pos+12:]))
	}
	batch := kmsg.RecordBatch{FirstOffset: end, PartitionLeaderEpoch: epoch, Magic: 2,
		Attributes: int16(kgo.CodecZstd), LastOffsetDelta: records - 1, FirstTimestamp: time.Now().UnixMilli(),
		MaxTimestamp: time.Now().UnixMilli(), ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		NumRecords: records, Records: []byte("junk where zstd frames belong")}
	raw := batch.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	// The CRC covers everything from the attributes (byte 21) on.
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	f, err := os.OpenFile(active, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(raw); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, ".clean-shutdown")); err != nil {
		t.Fatal(err)
	}
	return end, len(raw)
}

// TestSinkSkipsUndecodableBatch: a junk zstd batch written into a segment
// file past the broker's validation (as by an older broker or the disk)
// survives the broker's recovery; `millrace sink` sends one dead letter for
// it, counts it, and lands the records before and after it.
func TestSinkSkipsUndecodableBatch(t *testing.T) {
	t.Parallel()
	const topic, group = "badbatch", "badbatch-sink"
	b := startBroker(t)
	b.createTopic(t, topic, 1, nil)
	want := produceClicks(t, b, topic, 0, 2, 1, nil)

	b.stop(syscall.SIGTERM, 15*time.Second)
	at, size := appendJunkBatch(t, filepath.Join(b.data, "logs", topic+"-0"), 3)
	if at != 2 {
		t.Fatalf("the junk batch went to offset %d, want 2", at)
	}
	b.start()
	b.waitReady()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ends, err := b.admin(t).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if e, _ := ends.Lookup(topic, 0); e.Offset != 5 {
		t.Fatalf("after recovery the log ends at %d, want 5: recovery dropped the stored batch", e.Offset)
	}
	for h, n := range produceClicks(t, b, topic, 2, 4, 1, nil) {
		want[h] += n
	}

	metricsAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	out := t.TempDir()
	sink := startSink(t, b, "sink", group, topic, "file://"+out, "--metrics-listen", metricsAddr)
	waitLanded(t, b, group, topic, time.Minute, sink)
	checkLake(t, out+"/"+topic+"/**/*.parquet", want)

	dlq := b.client(t, kgo.ConsumeTopics(topic+".dlq"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	fetches := dlq.PollRecords(ctx, 10)
	if err := fetches.Err(); err != nil {
		t.Fatal(err)
	}
	recs := fetches.Records()
	if len(recs) != 1 {
		t.Fatalf("%d dead letters, want 1", len(recs))
	}
	var d lake.DeadLetter
	if err := json.Unmarshal(recs[0].Value, &d); err != nil {
		t.Fatal(err)
	}
	if d.Reason != "undecodable batch" || d.Topic != topic || d.Partition != 0 || d.Offset != 2 || d.LastOffset != 4 ||
		d.BatchBytes != size || d.Compression != "zstd" || d.Records != 3 || !strings.Contains(d.Error, "magic number") {
		t.Errorf("dead letter: %s", recs[0].Value)
	}

	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	counted := regexp.MustCompile(`(?m)^millrace_lake_undecodable_batches_total\{topic="badbatch"\} 1$`)
	if !counted.Match(body) {
		t.Errorf("/metrics does not count the batch:\n%s", grepLines(string(body), "undecodable"))
	}
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
