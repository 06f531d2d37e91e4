package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"millrace/internal/waitfor"
	"millrace/pipeline/appliance"
	"millrace/pipeline/monitor"
)

// TestTailToMissingTopicIsReported points the appliance's tailer at a topic
// that does not exist, on a broker that does not create topics on first
// use: within 10 s the appliance logs what is wrong and what to do, and the
// console's snapshot (what its page reads) shows the same message. Once the
// topic is created as the message says, the lines ship and the problem
// leaves the console.
func TestTailToMissingTopicIsReported(t *testing.T) {
	t.Parallel()
	b := startBroker(t, "--set", "auto.create.topics.enable=false")
	dir := t.TempDir()
	logDir := filepath.Join(dir, "app")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		t.Fatal(err)
	}
	lines := ""
	for i := range 3 {
		lines += fmt.Sprintf("%s INFO line %d\n", time.Now().UTC().Format(time.RFC3339Nano), i)
	}
	if err := os.WriteFile(filepath.Join(logDir, "service.log"), []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	// The appliance against an external broker creates the topics it
	// lists (the ops topics among them), not the tail's.
	cfgPath, _, webAddr := writeDemoConfig(t, dir, func(cfg *appliance.Config) {
		cfg.Brokers = []string{b.addr}
		cfg.Beacon, cfg.Sinks, cfg.Demo.WriteLog = nil, nil, ""
		cfg.Tail[0].Topic = "applogs"
		cfg.Tail[0].Paths = []string{filepath.Join(logDir, "*.log")}
		cfg.Tail[0].ScanFrequency = 500 * time.Millisecond
		cfg.OpsMetrics.Interval = time.Second
	})
	started := time.Now()
	up := startProcess(t, "up", "up", "--config", cfgPath)
	const advice = `topic applogs does not exist and the broker does not create topics on first use: run \"millrace topic create applogs\"`
	up.waitLog(advice, 1, 10*time.Second)
	t.Logf("the cause was logged %v after the start", time.Since(started).Round(time.Millisecond))

	snapshotURL := "http://" + webAddr + "/console/api/snapshot"
	var shown monitor.Problem
	waitfor.Until(t, 30*time.Second, "the console to show the missing topic", func() bool {
		for _, p := range consoleProblems(t, snapshotURL) {
			if p.Topic == "applogs" {
				shown = p
				return true
			}
		}
		return false
	})
	if shown.Cause != "topic_missing" || !strings.Contains(shown.Message, `run "millrace topic create applogs"`) || !strings.Contains(shown.Source, "millrace-up") {
		t.Fatalf("the console shows %+v", shown)
	}
	t.Logf("the console showed it %v after the start: %s", time.Since(started).Round(time.Millisecond), shown.Message)

	// The fix the message names.
	run(t, 30*time.Second, "", millraceBin, "topic", "create", "applogs", "-b", b.addr)
	adm := b.admin(t)
	waitfor.Until(t, 60*time.Second, "the 3 lines to ship once the topic exists", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ends, err := adm.ListEndOffsets(ctx, "applogs")
		if err != nil {
			return false
		}
		var n int64
		ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
		return n == 3
	})
	waitfor.Until(t, 30*time.Second, "the problem to leave the console", func() bool {
		return len(consoleProblems(t, snapshotURL)) == 0
	})
	up.waitLog(`msg="records ship again" component=ship topic=applogs`, 1, 10*time.Second)
}

// TestStandaloneTailToMissingTopic is the same as a user runs it from the
// README: `millrace tail` against a broker that does not create topics
// logs the cause within 10 s, and its /readyz answers 503 with the message
// until the topic exists.
func TestStandaloneTailToMissingTopic(t *testing.T) {
	t.Parallel()
	b := startBroker(t, "--set", "auto.create.topics.enable=false")
	dir := t.TempDir()
	logFile := filepath.Join(dir, "service.log")
	if err := os.WriteFile(logFile, []byte("one line\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	metricsAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	started := time.Now()
	tailer := startProcess(t, "tail", "tail", "-b", b.addr, "--topic", "applogs", "--data", filepath.Join(dir, "data"),
		"--metrics-listen", metricsAddr, logFile)
	tailer.waitLog(`topic applogs does not exist and the broker does not create topics on first use: run \"millrace topic create applogs\"`, 1, 10*time.Second)
	t.Logf("the cause was logged %v after the start", time.Since(started).Round(time.Millisecond))
	readyz := func() (int, string) {
		resp, err := http.Get("http://" + metricsAddr + "/readyz")
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := readyz(); code != http.StatusServiceUnavailable || !strings.Contains(body, `run "millrace topic create applogs"`) {
		t.Fatalf("/readyz with the topic missing: %d %q", code, body)
	}
	run(t, 30*time.Second, "", millraceBin, "topic", "create", "applogs", "-b", b.addr)
	waitfor.Until(t, 60*time.Second, "/readyz to answer 200 once the line shipped", func() bool {
		code, _ := readyz()
		return code == http.StatusOK
	})
	tailer.waitLog(`msg="records ship again" component=ship topic=applogs`, 1, 10*time.Second)
}

// consoleProblems reads the problems of the console's snapshot.
func consoleProblems(t *testing.T, url string) []monitor.Problem {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var s monitor.Snapshot
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&s) != nil {
		return nil
	}
	return s.Problems
}
