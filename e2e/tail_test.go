package e2e

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	tailagent "millrace/agents/tail"

	"millrace/internal/waitfor"
)

// tailRecord is the part of a log-line record the tail tests check.
type tailRecord struct {
	EventID     string `json:"event_id"`
	Source      string `json:"source"`
	Offset      int64  `json:"offset"`
	Line        string `json:"line"`
	Truncated   bool   `json:"truncated"`
	InvalidUTF8 bool   `json:"invalid_utf8"`
	header      string
}

// tailWatcher consumes a topic for the whole test, keeping the first
// event_id of every line, the duplicates, and which (stream, seq) lines
// arrived, so the writer can delete a rotated file only once its lines are
// in the topic (as an operator keeps rotated files longer than the agent
// can lag: a file deleted unread is lost to any agent).
type tailWatcher struct {
	cl *kgo.Client

	mu       sync.Mutex // guards the following
	records  int
	first    map[string]string // line -> event_id of its first copy
	dups     int
	badIDs   []string
	bad      []string
	seen     map[int][]bool // stream -> seq -> arrived
	progress time.Time
}

func newTailWatcher(t *testing.T, b *broker, topic string) *tailWatcher {
	w := &tailWatcher{
		cl:    b.client(t, kgo.ConsumeTopics(topic), kgo.FetchMaxWait(200*time.Millisecond)),
		first: map[string]string{}, seen: map[int][]bool{}, progress: time.Now(),
	}
	return w
}

// run consumes until ctx ends.
func (w *tailWatcher) run(ctx context.Context) {
	for ctx.Err() == nil {
		fs := w.cl.PollFetches(ctx)
		w.mu.Lock()
		fs.EachRecord(func(r *kgo.Record) { w.addLocked(r) })
		w.mu.Unlock()
	}
}

func (w *tailWatcher) addLocked(r *kgo.Record) {
	w.records++
	w.progress = time.Now()
	var rec tailRecord
	if err := json.Unmarshal(r.Value, &rec); err != nil {
		w.bad = append(w.bad, fmt.Sprintf("not JSON: %v: %q", err, r.Value))
		return
	}
	for _, h := range r.Headers {
		if h.Key == "event_id" {
			rec.header = string(h.Value)
		}
	}
	if rec.header != rec.EventID {
		w.bad = append(w.bad, fmt.Sprintf("header event_id %q differs from the field %q", rec.header, rec.EventID))
	}
	if id, dup := w.first[rec.Line]; dup {
		w.dups++
		if id != rec.EventID {
			w.badIDs = append(w.badIDs, fmt.Sprintf("%q re-sent with event_id %s, first %s", rec.Line, rec.EventID, id))
		}
		return
	}
	w.first[rec.Line] = rec.EventID
	stream, seq, ok := parseTestLine(rec.Line)
	if !ok {
		w.bad = append(w.bad, fmt.Sprintf("unexpected line %q", rec.Line))
		return
	}
	s := w.seen[stream]
	for len(s) <= seq {
		s = append(s, false)
	}
	s[seq] = true
	w.seen[stream] = s
}

// allSeen reports whether lines [lo, hi) of stream arrived.
func (w *tailWatcher) allSeen(stream, lo, hi int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.seen[stream]
	if len(s) < hi {
		return false
	}
	for _, ok := range s[lo:hi] {
		if !ok {
			return false
		}
	}
	return true
}

func (w *tailWatcher) unique() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.first)
}

// testLineEpoch is the time line 0 of every stream names: whole hours in
// the past, so a tailer that takes ts from the line (testLineTimestamp)
// lands the lines in hours that are complete. Set once for the process, so
// testLine stays a function of stream and seq.
var testLineEpoch = time.Now().UTC().Add(-3 * time.Hour).Truncate(time.Hour)

// testLineTimestamp is the tailer's timestamp setting (YAML, under tail:)
// that reads the time a testLine starts with.
const testLineTimestamp = `timestamp: {pattern: '^(\S+) s\d', layout: rfc3339}`

// testLineTime is the time line seq names: 100ms after the one before.
func testLineTime(seq int) time.Time {
	return testLineEpoch.Add(time.Duration(seq) * 100 * time.Millisecond)
}

// testLine is line seq of stream: unique, 45–115 bytes, starting with the
// time it names, as service logs do.
func testLine(stream, seq int) string {
	const pad = "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ-_"
	return fmt.Sprintf("%s s%d %07d %s", testLineTime(seq).Format("2006-01-02T15:04:05.000Z"), stream, seq, pad[:seq%64])
}

func parseTestLine(line string) (stream, seq int, ok bool) {
	f := strings.Fields(line)
	if len(f) < 3 || !strings.HasPrefix(f[1], "s") {
		return 0, 0, false
	}
	s, err1 := strconv.Atoi(f[1][1:])
	q, err2 := strconv.Atoi(f[2])
	return s, q, err1 == nil && err2 == nil && line == testLine(s, q)
}

// logStream is one live log file the writer appends to.
type logStream struct {
	id       int
	path     string
	f        *os.File
	seq      int // next line number
	curStart int // first line in the current content of path
	rotateAt time.Time
	kind     int // next rotation: 0 rename in the globs, 1 copytruncate, 2 rename out of the globs
}

// rotatedFile is a rotation's leftover and the lines it holds.
type rotatedFile struct {
	path           string
	stream, lo, hi int
	at             time.Time
}

// logWriter appends lines to streams and rotates them, as services and
// logrotate do.
type logWriter struct {
	t       *testing.T
	dir     string
	dataDir string // the agent's, to read its registry
	rng     *rand.Rand
	streams []*logStream
	rotated []rotatedFile
	n       int // rotations done
	counts  map[string]int
	written atomic.Int64
}

// progress is how many lines were written so far.
func (lw *logWriter) progress() int64 { return lw.written.Load() }

func (lw *logWriter) addStream() {
	id := len(lw.streams)
	s := &logStream{id: id, path: filepath.Join(lw.dir, fmt.Sprintf("app-%d.log", id)), kind: id % 3}
	s.f = lw.open(s.path)
	s.rotateAt = time.Now().Add(lw.interval())
	lw.streams = append(lw.streams, s)
}

func (lw *logWriter) interval() time.Duration {
	return 1500*time.Millisecond + time.Duration(lw.rng.IntN(2500))*time.Millisecond
}

func (lw *logWriter) open(path string) *os.File {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		lw.t.Error(err)
	}
	return f
}

// write appends n lines to s in one write, so the file only ever holds
// whole lines of this writer.
func (lw *logWriter) write(s *logStream, n int) {
	var b strings.Builder
	for range n {
		b.WriteString(testLine(s.id, s.seq))
		b.WriteByte('\n')
		s.seq++
	}
	lw.written.Add(int64(n))
	if _, err := s.f.WriteString(b.String()); err != nil {
		lw.t.Error(err)
	}
}

// discovered reports whether the agent's registry holds the identity of
// s's current file with a fingerprint of its first bytes. Only then may it
// be rotated out of the agent's sight (renamed out of the globs, or
// copytruncated into an excluded copy): a file created and moved away
// while the agent was down or paused, before it was ever seen, cannot be
// shipped by any agent. Once known, the agent finds it by identity however
// long it is down. Reading the registry costs a file read; it is done at
// most every 100ms.
func (lw *logWriter) discovered(s *logStream) bool {
	entries, err := tailagent.ReadRegistry(lw.dataDir)
	if err != nil {
		return false // being replaced right now; try again later
	}
	fi, err := os.Stat(s.path)
	if err != nil {
		return false
	}
	st := fi.Sys().(*syscall.Stat_t)
	head := make([]byte, 4096)
	f, err := os.Open(s.path)
	if err != nil {
		return false
	}
	n, _ := io.ReadFull(f, head)
	f.Close()
	for _, e := range entries {
		if e.Inode != st.Ino || e.FingerprintLen == 0 || e.FingerprintLen > n {
			continue
		}
		sum := sha256.Sum256(head[:e.FingerprintLen])
		if hex.EncodeToString(sum[:16]) == e.Fingerprint {
			return true
		}
	}
	return false
}

// rotate rotates s by its next kind.
func (lw *logWriter) rotate(s *logStream) {
	lw.n++
	switch s.kind {
	case 0, 2:
		dst := fmt.Sprintf("%s.%d", s.path, lw.n) // still app-*: in the globs
		if s.kind == 2 {
			dst = filepath.Join(lw.dir, fmt.Sprintf("old-%d.%d", s.id, lw.n)) // out of the globs
		}
		if err := os.Rename(s.path, dst); err != nil {
			lw.t.Error(err)
		}
		// As a service does until it notices (SIGHUP): a few more lines
		// go to the renamed file through the descriptor it still holds.
		lw.write(s, 3)
		s.f.Close()
		s.f = lw.open(s.path)
		lw.rotated = append(lw.rotated, rotatedFile{path: dst, stream: s.id, lo: s.curStart, hi: s.seq, at: time.Now()})
		lw.counts["rename"]++
	case 1:
		// copytruncate. logrotate loses the lines written between its copy
		// and its truncate; this writer writes nothing meanwhile (the copy
		// and truncate run in its own goroutine, between its writes) so the
		// test measures the agent, not that race. The copy is excluded by
		// the agent's config, as compressed copies are.
		dst := fmt.Sprintf("%s.%d.ct", s.path, lw.n)
		src, err := os.Open(s.path)
		if err != nil {
			lw.t.Error(err)
			return
		}
		out, err := os.Create(dst)
		if err == nil {
			_, err = io.Copy(out, src)
			out.Close()
		}
		src.Close()
		if err == nil {
			err = os.Truncate(s.path, 0)
		}
		if err != nil {
			lw.t.Error(err)
		}
		lw.rotated = append(lw.rotated, rotatedFile{path: dst, stream: s.id, lo: s.curStart, hi: s.seq, at: time.Now()})
		lw.counts["copytruncate"]++
	}
	s.curStart = s.seq
	s.kind = (s.kind + 1) % 3
	s.rotateAt = time.Now().Add(lw.interval())
}

// deleteShipped removes rotated files older than a second whose lines are
// all in the topic, as logrotate's rotate count would, later.
func (lw *logWriter) deleteShipped(w *tailWatcher) {
	kept := lw.rotated[:0]
	for _, r := range lw.rotated {
		if time.Since(r.at) > time.Second && w.allSeen(r.stream, r.lo, r.hi) {
			if err := os.Remove(r.path); err != nil {
				lw.t.Error(err)
			}
			lw.counts["deleted"]++
			continue
		}
		kept = append(kept, r)
	}
	lw.rotated = kept
}

// run writes total lines (plus a few per rename) over about 50 seconds.
func (lw *logWriter) run(ctx context.Context, total int, w *tailWatcher) {
	for range 4 {
		lw.addStream()
	}
	written := 0
	lastDelete := time.Now()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	lastRegistry := time.Now()
	for written < total && ctx.Err() == nil {
		<-tick.C
		// New files appear while the agent runs.
		if written >= total/4 && len(lw.streams) == 4 || written >= total/2 && len(lw.streams) == 5 {
			lw.addStream()
		}
		for _, s := range lw.streams {
			n := min(4, total-written)
			lw.write(s, n)
			written += n
			if time.Now().After(s.rotateAt) && time.Since(lastRegistry) > 100*time.Millisecond {
				lastRegistry = time.Now()
				if lw.discovered(s) {
					lw.rotate(s)
				} else {
					lw.counts["postponed"]++
				}
			}
		}
		if time.Since(lastDelete) > 500*time.Millisecond {
			lw.deleteShipped(w)
			lastDelete = time.Now()
		}
	}
	for _, s := range lw.streams {
		s.f.Close()
	}
}

// rereadTopic reads topic from the start to its end offsets with a new
// consumer and returns the lines it holds.
func rereadTopic(t *testing.T, b *broker, topic string) map[string]bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ends, err := b.admin(t).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Logf("re-reading %s: %v", topic, err)
		return nil
	}
	left := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			left[o.Partition] = o.Offset
		}
	})
	cl := b.client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	found := map[string]bool{}
	for len(left) > 0 && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			var rec tailRecord
			if json.Unmarshal(r.Value, &rec) == nil {
				found[rec.Line] = true
			}
			if end, ok := left[r.Partition]; ok && r.Offset+1 >= end {
				delete(left, r.Partition)
			}
		})
	}
	if len(left) > 0 {
		t.Logf("re-reading %s: partitions %v not read to their end", topic, left)
	}
	return found
}

// scrapeCounter reads one counter from a Prometheus text endpoint.
func scrapeCounter(t *testing.T, url, name string) float64 {
	t.Helper()
	cl := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := cl.Get(url)
	if err != nil {
		t.Fatalf("scraping %s: %v", url, err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatalf("%s has no %s", url, name)
	return 0
}

// TestTailShipsEveryLine runs `millrace tail` against `millrace broker`
// while a writer appends 200,000 lines to several files that are rotated
// by rename and by copytruncate, new files appear and old ones are
// deleted; the agent is killed (SIGKILL) and restarted twice and the broker
// is down for 20 seconds. Every line must reach the topic; a line may come
// twice only with the same event_id; descriptors return to their baseline.
func TestTailShipsEveryLine(t *testing.T) {
	const total = 200_000
	const topic = "logs"
	b := startBroker(t)
	b.createTopic(t, topic, 3, nil)
	logDir, dataDir := t.TempDir(), t.TempDir()
	metricsAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	cfgPath := filepath.Join(t.TempDir(), "agent.yaml")
	// A small producer buffer, so the outage fills it and reading pauses.
	cfg := `ship:
  linger: 5ms
  max_batch_bytes: 262144
  max_buffered_bytes: 2097152
  max_buffered_records: 5000
tail:
  host: e2e-1
  exclude: ["*.ct"]
  scan_frequency: 1s
  poll_interval: 100ms
  close_inactive: 2s
  checkpoint_interval: 200ms
`
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	agent := startProcess(t, "tail", "tail", "-b", b.addr, "--topic", topic, "--data", dataDir,
		"--config", cfgPath, "--metrics-listen", metricsAddr, filepath.Join(logDir, "app-*"))
	watcher := newTailWatcher(t, b, topic)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	wg.Add(2)
	go func() {
		defer wg.Done()
		watcher.run(ctx)
	}()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 5))
	lw := &logWriter{t: t, dir: logDir, dataDir: dataDir, rng: rng, counts: map[string]int{}}
	writerDone := make(chan struct{})
	go func() {
		defer wg.Done()
		defer close(writerDone)
		lw.run(ctx, total, watcher)
	}()
	begin := time.Now()
	at := func(d time.Duration) { time.Sleep(time.Until(begin.Add(d))) }

	at(time.Duration(3000+rng.IntN(6000)) * time.Millisecond)
	t.Logf("%v: SIGKILL the agent", time.Since(begin).Round(time.Millisecond))
	agent.kill()
	agent.restartAfter(time.Second) // rotations go on meanwhile

	at(14 * time.Second)
	t.Logf("%v: broker down for 20s", time.Since(begin).Round(time.Millisecond))
	down := make(chan struct{})
	go func() {
		defer close(down)
		b.stopFor(20 * time.Second)
	}()
	// Reading must pause once the producer's buffer is full: what the agent
	// reads over the outage's second half is far less than was written.
	at(24 * time.Second)
	read1, written1 := scrapeCounter(t, "http://"+metricsAddr+"/metrics", "millrace_tail_lines_read_total"), lw.progress()
	at(32 * time.Second)
	read2, written2 := scrapeCounter(t, "http://"+metricsAddr+"/metrics", "millrace_tail_lines_read_total"), lw.progress()
	if read2-read1 > float64(written2-written1)/10 {
		t.Errorf("broker down: the agent read %v lines while %d were written: reading did not pause", read2-read1, written2-written1)
	}
	<-down
	t.Logf("%v: broker back", time.Since(begin).Round(time.Millisecond))

	at(time.Duration(38000+rng.IntN(7000)) * time.Millisecond)
	t.Logf("%v: SIGKILL the agent", time.Since(begin).Round(time.Millisecond))
	agent.kill()
	agent.restartAfter(time.Second)
	// The restarted agent settles (finds and opens its files) before its
	// descriptors are taken as the baseline; nothing says when it has.
	time.Sleep(3 * time.Second)
	baseline := fdTargets(t, agent.pid())
	baseFDs := len(baseline) - countUnder(baseline, logDir)

	<-writerDone
	// A little over total: a renamed file gets a few lines after the rename.
	written := int(lw.progress())
	t.Logf("%v: writer done: %d lines, %v", time.Since(begin).Round(time.Millisecond), written, lw.counts)
	// Wait for every line, giving up after 30s without progress. Not a
	// waitfor.Until: the limit is a time without progress, not a total,
	// and what is missing is reported below rather than failed here.
	for watcher.unique() < written {
		watcher.mu.Lock()
		stalled := time.Since(watcher.progress) > 30*time.Second
		watcher.mu.Unlock()
		if stalled {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("%v: all consumed", time.Since(begin).Round(time.Millisecond))

	watcher.mu.Lock()
	t.Logf("lines written %d, records read %d, unique lines %d, duplicates %d", written, watcher.records, len(watcher.first), watcher.dups)
	var lost []string // the missing lines themselves
	for _, s := range lw.streams {
		missing := 0
		var ranges []string
		for seq := 0; seq < s.seq; seq++ {
			if _, ok := watcher.first[testLine(s.id, seq)]; ok {
				continue
			}
			lo := seq
			for seq < s.seq {
				if _, ok := watcher.first[testLine(s.id, seq)]; ok {
					break
				}
				lost = append(lost, testLine(s.id, seq))
				seq++
			}
			missing += seq - lo
			ranges = append(ranges, fmt.Sprintf("%d-%d", lo, seq-1))
		}
		if missing > 0 {
			t.Errorf("stream %d: %d of %d lines never arrived: %s", s.id, missing, s.seq, strings.Join(ranges[:min(8, len(ranges))], " "))
		}
	}
	for _, m := range append(watcher.badIDs, watcher.bad...)[:min(10, len(watcher.badIDs)+len(watcher.bad))] {
		t.Error(m)
	}
	watcher.mu.Unlock()
	if len(lost) > 0 {
		// Tell a line the agent never shipped from one the watcher missed.
		found := rereadTopic(t, b, topic)
		inTopic := 0
		for _, line := range lost {
			if found[line] {
				inTopic++
			}
		}
		t.Logf("re-reading the topic from the start finds %d of the %d missing lines", inTopic, len(lost))
	}

	// Every rotated and deleted file is released within close_inactive
	// (2s) plus a scan; allow for a loaded machine.
	var fds []string
	defer reportLastSeen(t, func() string { return fmt.Sprintf("%d open:\n%s", len(fds), strings.Join(fds, "\n")) })()
	waitfor.Until(t, 20*time.Second, fmt.Sprintf("the descriptors to return to the baseline %d", baseFDs), func() bool {
		fds = fdTargets(t, agent.pid())
		return countUnder(fds, logDir) == 0 && len(fds) <= baseFDs
	})
	t.Logf("descriptors: %d, baseline %d", len(fds), baseFDs)
}

// TestTailLineShapes ships multiline events, an over-long line and invalid
// UTF-8 through `millrace tail` and `millrace broker`.
func TestTailLineShapes(t *testing.T) {
	const topic = "shapes"
	b := startBroker(t)
	b.createTopic(t, topic, 1, nil)
	logDir, dataDir := t.TempDir(), t.TempDir()
	cfgPath := filepath.Join(t.TempDir(), "agent.yaml")
	cfg := `tail:
  max_line_bytes: 1024
  multiline:
    start_pattern: '^\d{4}-'
    max_lines: 3
    timeout: 500ms
`
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	long := "2026-01-01 LONG " + strings.Repeat("x", 5000)
	content := "2026-01-01 ERROR boom\n" +
		"java.lang.RuntimeException: boom\n" +
		"\tat a.b(C.java:1)\n" +
		"2026-01-01 ERROR deep\nx1\nx2\nx3\nx4\n" +
		long + "\n" +
		"2026-01-01 BAD \xff\xfe end\r\n" +
		"2026-01-01 INFO last\n"
	if err := os.WriteFile(filepath.Join(logDir, "app.log"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	startProcess(t, "tail", "tail", "-b", b.addr, "--topic", topic, "--data", dataDir, "--config", cfgPath, filepath.Join(logDir, "*.log"))
	cl := b.client(t, kgo.ConsumeTopics(topic), kgo.FetchMaxWait(200*time.Millisecond))
	var got []tailRecord
	deadline := time.Now().Add(30 * time.Second)
	for len(got) < 5 && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			var rec tailRecord
			if err := json.Unmarshal(r.Value, &rec); err != nil {
				t.Fatalf("record is not JSON: %v: %q", err, r.Value)
			}
			got = append(got, rec)
		})
		cancel()
	}
	want := []tailRecord{
		{Line: "2026-01-01 ERROR boom\njava.lang.RuntimeException: boom\n\tat a.b(C.java:1)"},
		{Line: "2026-01-01 ERROR deep\nx1\nx2", Truncated: true},
		{Line: long[:1024], Truncated: true},
		{Line: "2026-01-01 BAD \uFFFD\uFFFD end", InvalidUTF8: true},
		{Line: "2026-01-01 INFO last"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d: %+v", len(got), len(want), got)
	}
	var offset int64
	for i, w := range want {
		g := got[i]
		if g.Line != w.Line || g.Truncated != w.Truncated || g.InvalidUTF8 != w.InvalidUTF8 {
			t.Errorf("record %d: line %.80q truncated=%v invalid_utf8=%v, want %.80q truncated=%v invalid_utf8=%v",
				i, g.Line, g.Truncated, g.InvalidUTF8, w.Line, w.Truncated, w.InvalidUTF8)
		}
		if g.Offset < offset || len(g.EventID) != 32 {
			t.Errorf("record %d: offset %d (previous %d), event_id %q", i, g.Offset, offset, g.EventID)
		}
		offset = g.Offset
	}
	if want := int64(strings.Index(content, "2026-01-01 INFO last")); got[4].Offset != want {
		t.Errorf("last event at offset %d, want %d", got[4].Offset, want)
	}

	// librdkafka reads the tailer's batches too (lz4 frames, the default,
	// written without the optional content checksum).
	out := run(t, 30*time.Second, "", "kcat", "-b", b.addr, "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%s\n")
	values := strings.Split(strings.TrimSpace(out), "\n")
	if len(values) != len(want) {
		t.Fatalf("kcat -C read %d records, want %d:\n%s", len(values), len(want), out)
	}
	for i, v := range values {
		var rec tailRecord
		if err := json.Unmarshal([]byte(v), &rec); err != nil || rec != got[i] {
			t.Errorf("kcat -C record %d: %q (%v), want the record kgo read: %+v", i, v, err, got[i])
		}
	}
}
