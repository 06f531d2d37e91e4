package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/internal/waitfor"
)

// segmentLog matches a live segment file of broker/log ("<20 digits>.log";
// a deleted one has ".deleted" appended until file.delete.delay.ms).
var segmentLog = regexp.MustCompile(`^\d{20}\.log$`)

// TestTieredTopicLocalTail: a broker process with a file:// remote store
// and a topic with small segments and local.retention.ms of a second
// uploads every closed segment (its .log and its index, time index,
// transaction index and producer snapshot objects, under the topic's ID)
// and keeps only the tail on local disk; the upload counters agree with
// the objects stored.
func TestTieredTopicLocalTail(t *testing.T) {
	t.Parallel()
	const topic, records = "tiered", 200
	remote := t.TempDir()
	metricsAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	b := startBroker(t, "--metrics-listen", metricsAddr,
		"--set", "remote.log.storage.system.enable=true",
		"--set", "millrace.remote.storage.url=file://"+remote,
		"--set", "remote.log.manager.task.interval.ms=200",
		"--set", "log.retention.check.interval.ms=200")
	b.createTopic(t, topic, 1, map[string]*string{
		"remote.storage.enable": kadm.StringPtr("true"),
		"segment.bytes":         kadm.StringPtr("4096"),
		"local.retention.ms":    kadm.StringPtr("1000"),
	})
	cl := b.client(t, kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(kgo.NoCompression()))
	value := strings.Repeat("x", 200)
	for i := range records {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := cl.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "%d %s", i, value)}).FirstErr()
		cancel()
		if err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}

	local := filepath.Join(b.data, "logs", topic+"-0")
	metrics := "http://" + metricsAddr + "/metrics"
	var remoteLogs []string
	waitfor.Until(t, 60*time.Second, "closed segments remote and only the tail local", func() bool {
		remoteLogs = remoteObjects(t, remote, ".log")
		return len(remoteLogs) >= 5 && len(localSegments(t, local)) == 1 &&
			scrapeCounter(t, metrics, "millrace_tier_uploaded_segments_total") == float64(len(remoteLogs))
	})
	for _, suffix := range []string{".index", ".timeindex", ".txnindex", ".snapshot"} {
		if got := remoteObjects(t, remote, suffix); len(got) != len(remoteLogs) {
			t.Fatalf("%d %s objects for %d segments", len(got), suffix, len(remoteLogs))
		}
	}
	// <topic>-<topic ID>/<partition>/<base>-<last>.log (broker/tier/state.go)
	key := regexp.MustCompile(`^` + topic + `-[A-Za-z0-9_-]{22}/0/00000000000000000000-\d{20}\.log$`)
	if !key.MatchString(remoteLogs[0]) {
		t.Fatalf("first segment's object %s", remoteLogs[0])
	}
	if errs := scrapeCounter(t, metrics, "millrace_tier_upload_errors_total"); errs != 0 {
		t.Fatalf("%v upload errors", errs)
	}
}

// remoteObjects lists the objects under dir whose names end in suffix, as
// slash-separated names relative to it, in order.
func remoteObjects(t *testing.T, dir, suffix string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(d.Name(), suffix) || strings.HasPrefix(d.Name(), ".tmp-") {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		out = append(out, filepath.ToSlash(rel))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// localSegments lists a partition directory's live segment files.
func localSegments(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if segmentLog.MatchString(e.Name()) {
			out = append(out, e.Name())
		}
	}
	return out
}
