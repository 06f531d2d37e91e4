package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"millrace/audit"
	"millrace/internal/waitfor"
	"millrace/pipeline/reconcile"
)

// TestEndToEndExactlyOnce runs the whole pipeline as separate processes —
// `millrace broker`, `tail`, `beacon` and one `sink` per topic — and checks
// that every event reaches the lake exactly once and that `millrace audit`
// accounts for each of them:
//   - 200,000 log lines written through rotations (rename in and out of the
//     globs, copytruncate) while the tailer is SIGKILLed 3 times and the log
//     sink twice, so lines are sent again and windows landed again;
//   - 20,000 clicks posted in batches with client-made UUIDv7 event_ids by a
//     client that sends the same body again after every 503, timeout or
//     connection error, while the broker is SIGSTOPped for longer than the
//     beacon's ack timeout, so some answered-503 events were delivered all
//     the same and arrive twice.
//
// DuckDB then finds count(*) = count(DISTINCT event_id) = 220,000, every
// line once, and the audit's counts add up exactly per source and hour.
func TestEndToEndExactlyOnce(t *testing.T) {
	t.Parallel()
	runExactlyOnce(t, exactlyOnceScenario{format: "hive", lines: 200_000, linesPerTick: 8, clicks: 20_000, clickBatch: 100})
}

// exactlyOnceScenario is what the exactly-once scenario (runExactlyOnce)
// lands, and how. Its chaos runs on one timeline whatever the counts: the
// lines and the clicks each span about 25 seconds.
type exactlyOnceScenario struct {
	// format is the sinks' --format: hive (directories and _SUCCESS
	// markers) or iceberg (one table per topic in the lake's SQLite
	// catalog, audited through it).
	format string
	// lines is how many log lines are written, linesPerTick how many each
	// stream gets every 5ms (8 spreads 200,000 over the timeline).
	lines, linesPerTick int
	// clicks is how many clicks are posted, clickBatch how many per POST
	// (one POST every 120ms: 100 spreads 20,000 over the timeline).
	clicks, clickBatch int
	// killBeacon SIGKILLs the beacon once mid-stream and restarts it: the
	// requests it held fail and are sent again to its next run. The counts
	// it acknowledged after its last publication are then lost, so the
	// clicks' hour is judged ok if none were, else unknown (never a
	// mismatch), and the beacon's accepted count may fall short of what
	// the topic holds by those.
	killBeacon bool
}

// runExactlyOnce runs scenario s: the broker, the tailer, the beacon and a
// sink per topic as separate processes; the tailer SIGKILLed 3 times and
// the log sink twice while the lines are written through rotations; the
// broker SIGSTOPped for longer than the beacon's ack timeout while the
// clicks are posted (and the beacon SIGKILLed if s says so). Then every
// line and click is in the lake exactly once, and `millrace audit` adds up
// per source and hour.
func runExactlyOnce(t *testing.T, s exactlyOnceScenario) {
	const ackTimeout = time.Second
	b := startBroker(t)
	for _, topic := range []string{"logs", "logs.dlq", "clicks", "clicks.dlq"} {
		b.createTopic(t, topic, 3, nil)
	}
	b.createTopic(t, audit.Topic, 1, nil)

	root := t.TempDir()
	lake := "file://" + root
	sinkCfg := filepath.Join(t.TempDir(), "sink.yaml")
	// Markers come a second after an hour (and every partition) is past its
	// end, so the clicks' past hours are judged within the test.
	if err := os.WriteFile(sinkCfg, []byte("lake:\n  success_grace: 1s\n  success_interval: 200ms\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sinkArgs := func(group, topic, schema string) []string {
		return []string{"sink", "-b", b.addr, "--group", group, "--topic", topic, "--schema", schema, "--out", lake,
			"--format", s.format, "--config", sinkCfg, "--roll-rows", "20000", "--idle-timeout", "500ms", "--session-timeout", "6s", "--log-level", "warn"}
	}
	logSink := startProcess(t, "sink-logs", sinkArgs("lake-logs", "logs", "log")...)
	clickSink := startProcess(t, "sink-clicks", sinkArgs("lake-clicks", "clicks", "click")...)

	logDir, dataDir := t.TempDir(), t.TempDir()
	tailCfg := filepath.Join(t.TempDir(), "tail.yaml")
	if err := os.WriteFile(tailCfg, []byte(`ship:
  linger: 5ms
tail:
  host: e2e-1
  exclude: ["*.ct"]
  scan_frequency: 500ms
  poll_interval: 100ms
  close_inactive: 2s
  checkpoint_interval: 200ms
  `+testLineTimestamp+`
audit:
  interval: 500ms
`), 0o644); err != nil {
		t.Fatal(err)
	}
	tailer := startProcess(t, "tail", "tail", "-b", b.addr, "--topic", "logs", "--data", dataDir,
		"--config", tailCfg, filepath.Join(logDir, "app-*"))
	bc := startBeacon(t, b, fmt.Sprintf(`
beacon:
  topic: clicks
  rate_limit: -1
  ack_timeout: %v
ship:
  linger: 5ms
audit:
  interval: 500ms
`, ackTimeout))

	watcher := newTailWatcher(t, b, "logs")
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		watcher.run(ctx)
	}()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 24))
	lw := &logWriter{t: t, dir: logDir, dataDir: dataDir, rng: rng, counts: map[string]int{}}
	writerDone := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(writerDone)
		writeExactly(ctx, lw, s.lines, s.linesPerTick, watcher)
	}()

	// The clicks' ts is two hours back (within the beacon's 24h clock-skew
	// bound, so kept as sent): their hours are complete, and judged, as soon
	// as the click sink is past them.
	clickHour := time.Now().UTC().Add(-2 * time.Hour).Truncate(time.Hour)
	// Half the senders wait longer than the ack timeout for an answer (they
	// get 503s), half give up before it (timeouts, the connection closed).
	poster := &clickPoster{url: bc.url + "/v1/events", patient: &http.Client{Timeout: 3 * ackTimeout},
		hasty: &http.Client{Timeout: ackTimeout * 7 / 10}}
	posterDone := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(posterDone)
		poster.run(ctx, s.clicks, s.clickBatch, clickHour, 120*time.Millisecond)
	}()

	begin := time.Now()
	at := func(d time.Duration) { time.Sleep(time.Until(begin.Add(d))) }
	logf := func(format string, args ...any) {
		t.Logf("%v: "+format, append([]any{time.Since(begin).Round(time.Millisecond)}, args...)...)
	}
	// The chaos: each step at a time, with a random part, while both writers
	// run (about 25s for the lines, 24s for the clicks).
	tailKills, tailKillsMidStream := 0, 0
	killTail := func() {
		logf("SIGKILL the tailer (%d lines written)", lw.progress())
		tailKills++
		if running(writerDone) {
			tailKillsMidStream++
		}
		tailer.kill()
		tailer.restartAfter(300 * time.Millisecond)
	}
	killSink := func() {
		logf("SIGKILL the log sink")
		logSink.kill()
		logSink.restartAfter(200 * time.Millisecond)
	}
	at(time.Duration(3000+rng.IntN(2000)) * time.Millisecond)
	killTail()
	if s.killBeacon {
		at(time.Duration(5500+rng.IntN(1000)) * time.Millisecond)
		logf("SIGKILL the beacon (%s)", poster)
		if !running(posterDone) {
			t.Fatal("the clicks were all posted before the beacon was killed")
		}
		bc.kill()
		bc.restartAfter(300 * time.Millisecond)
	}
	at(time.Duration(7000+rng.IntN(2000)) * time.Millisecond)
	killSink()
	at(11 * time.Second)
	// Longer than the ack timeout: requests in flight are answered 503 (or
	// time out) while their events wait in the beacon's producer, which
	// delivers them when the broker resumes.
	logf("SIGSTOP the broker for %v", ackTimeout+2500*time.Millisecond)
	if err := syscall.Kill(b.pid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(ackTimeout + 2500*time.Millisecond)
	if err := syscall.Kill(b.pid(), syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	logf("SIGCONT the broker")
	at(time.Duration(16000+rng.IntN(2000)) * time.Millisecond)
	killTail()
	at(time.Duration(19000+rng.IntN(2000)) * time.Millisecond)
	killSink()
	at(time.Duration(22000+rng.IntN(2000)) * time.Millisecond)
	killTail()

	<-writerDone
	if int(lw.progress()) != s.lines {
		t.Fatalf("the writer wrote %d lines, want %d", lw.progress(), s.lines)
	}
	logf("writer done: %v", lw.counts)
	if tailKillsMidStream < 2 || lw.n == 0 {
		t.Fatalf("the tailer was SIGKILLed %d times while lines were written, through %d rotations; want at least 2 kills through rotations",
			tailKillsMidStream, lw.n)
	}
	waitfor.Until(t, 2*time.Minute, "every line in the topic", func() bool { return watcher.unique() >= s.lines })
	// A graceful stop publishes the tailer's last audit counts. Its last
	// run may have just started: SIGTERM before it handles signals would
	// kill it.
	tailer.waitLog("msg=tailing ", 1+tailKills, time.Minute)
	if !tailer.stop(syscall.SIGTERM, 30*time.Second) || tailer.exitCode() != 0 {
		t.Errorf("the tailer did not stop cleanly on SIGTERM (status %d)", tailer.exitCode())
	}
	<-posterDone
	logf("clicks posted: %s", poster)
	if poster.err != nil {
		t.Fatal(poster.err)
	}
	if ctx.Err() != nil || t.Failed() {
		t.FailNow()
	}
	if !bc.stop(syscall.SIGTERM, 30*time.Second) || bc.exitCode() != 0 {
		t.Errorf("the beacon did not stop cleanly on SIGTERM (status %d)", bc.exitCode())
	}
	if poster.retried.Load() == 0 {
		t.Fatal("no request was answered 503 or timed out: the broker pause did not test the retries")
	}
	if s.killBeacon && poster.connErrors.Load() == 0 {
		t.Fatal("no request failed on its connection: the beacon's SIGKILL did not test the retries")
	}
	waitLanded(t, b, "lake-logs", "logs", 2*time.Minute, logSink)
	waitLanded(t, b, "lake-clicks", "clicks", 2*time.Minute, clickSink)
	// The lines name hours hours back (testLineTime): the tailer takes their
	// ts from the text, so each hour is complete and is judged by the audit
	// like the clicks' hour: in directories once it has its marker, in a
	// table once the table's offsets reach the topic's end (waitLanded).
	logHours := lineHours(lw)
	if s.format == "hive" {
		markers := []string{filepath.Join(root, "clicks", clickHour.Format("dt=2006-01-02/hr=15"), "_SUCCESS")}
		for _, hour := range sortedHours(logHours) {
			markers = append(markers, filepath.Join(root, "logs", hour.Format("dt=2006-01-02/hr=15"), "_SUCCESS"))
		}
		for _, marker := range markers {
			waitfor.Until(t, time.Minute, marker, func() bool { _, err := os.Stat(marker); return err == nil })
		}
	}
	watcher.mu.Lock()
	for _, m := range append(watcher.badIDs, watcher.bad...)[:min(10, len(watcher.badIDs)+len(watcher.bad))] {
		t.Error(m)
	}
	watcher.mu.Unlock()
	// What the topics hold: every record the broker acknowledged, repeats
	// included (the producers are idempotent, so offsets are dense).
	adm := b.admin(t)
	_, logRecords := groupProgress(t, adm, "lake-logs", "logs")
	_, clickRecords := groupProgress(t, adm, "lake-clicks", "clicks")
	logf("all landed; the topics hold %d log records and %d clicks", logRecords, clickRecords)

	checkExactlyOnceLake(t, root, lw, s.clicks)
	if s.format == "iceberg" {
		checkExactlyOnceTables(t, root, int(lw.progress()), s.clicks)
	}
	checkExactlyOnceAudit(t, b, lake, s, clickHour, logHours, logRecords, clickRecords)
	logf("checked")
}

// running reports whether done is still open.
func running(done <-chan struct{}) bool {
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// writeExactly writes exactly total lines to lw's streams, perTick per
// stream every 5ms (8 make 200,000 in about 25s), rotating each every few
// seconds by its next kind and deleting rotated files once their lines are
// in the topic.
func writeExactly(ctx context.Context, lw *logWriter, total, perTick int, w *tailWatcher) {
	for range 4 {
		lw.addStream()
	}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	lastDelete, lastRegistry := time.Now(), time.Now()
	for int(lw.progress()) < total && ctx.Err() == nil {
		<-tick.C
		// New files appear while the agent runs.
		if p := int(lw.progress()); p >= total/4 && len(lw.streams) == 4 || p >= total/2 && len(lw.streams) == 5 {
			lw.addStream()
		}
		for _, s := range lw.streams {
			left := total - int(lw.progress())
			if left <= 0 {
				break
			}
			lw.write(s, min(perTick, left))
			// A rename writes 3 more lines to the renamed file: rotate only
			// while they fit in the total.
			if left-perTick > 3 && time.Now().After(s.rotateAt) && time.Since(lastRegistry) > 100*time.Millisecond {
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

// clickPoster posts clicks to the beacon in batches and, like beacon.js,
// sends the same body (the same event ids) again after a 503, a timeout or
// a connection error, until it is answered 2xx.
type clickPoster struct {
	url            string
	patient, hasty *http.Client

	requests, retried, connErrors atomic.Int64
	answers503, timeouts          atomic.Int64

	mu  sync.Mutex // guards err
	err error      // the first answer no retry can fix
}

func (p *clickPoster) String() string {
	return fmt.Sprintf("%d requests, %d retried (%d answered 503, %d timed out, %d connection errors)",
		p.requests.Load(), p.retried.Load(), p.answers503.Load(), p.timeouts.Load(), p.connErrors.Load())
}

// run posts total clicks in batches of batch, one batch every interval
// (batches retried meanwhile run in parallel, up to 4), each click's ts in
// hour.
func (p *clickPoster) run(ctx context.Context, total, batch int, hour time.Time, interval time.Duration) {
	bodies := make(chan []byte)
	var wg sync.WaitGroup
	for i := range 4 {
		cl := p.patient
		if i%2 == 1 {
			cl = p.hasty
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for body := range bodies {
				p.deliver(ctx, cl, body)
			}
		}()
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for i := 0; i < total && ctx.Err() == nil; i += batch {
		events := make([]string, 0, batch)
		for j := i; j < min(i+batch, total); j++ {
			ts := hour.Add(time.Duration(j) * 150 * time.Millisecond) // 20,000 clicks span 50 minutes
			events = append(events, fmt.Sprintf(`{"event_id":%q,"type":"click","url":"https://shop.example/p/%d","anonymous_id":"anon-%d","ts":%d,"title":"click %d"}`,
				uuid.Must(uuid.NewV7()).String(), j%500, j%700, ts.UnixMilli(), j))
		}
		select {
		case bodies <- []byte("[" + strings.Join(events, ",") + "]"):
		case <-ctx.Done():
		}
		<-tick.C
	}
	close(bodies)
	wg.Wait()
}

// deliver posts body until it is answered 2xx; any other answer but 503 is
// an error of the test's own making.
func (p *clickPoster) deliver(ctx context.Context, cl *http.Client, body []byte) {
	for attempt := 0; ctx.Err() == nil; attempt++ {
		if attempt > 0 {
			p.retried.Add(1)
			time.Sleep(200 * time.Millisecond) // beacon.js backs off too
		}
		p.requests.Add(1)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(body))
		if err != nil {
			p.fail(err)
			return
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := cl.Do(req)
		if err != nil {
			var timeout interface{ Timeout() bool }
			if errors.As(err, &timeout) && timeout.Timeout() {
				p.timeouts.Add(1)
			} else {
				p.connErrors.Add(1)
			}
			continue
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch {
		case resp.StatusCode/100 == 2:
			return
		case resp.StatusCode == http.StatusServiceUnavailable:
			p.answers503.Add(1)
		default:
			p.fail(fmt.Errorf("POST answered %d: %s", resp.StatusCode, answer))
			return
		}
	}
}

func (p *clickPoster) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err == nil {
		p.err = err
	}
}

// checkExactlyOnceLake asserts with DuckDB that the lake holds every line
// and each of the clicks exactly once: in directories, every Parquet file
// under the topics'; in tables, the files their current snapshots list.
func checkExactlyOnceLake(t *testing.T, root string, lw *logWriter, clicks int) {
	t.Helper()
	db := openDuck(t)
	source := func(topic string) string {
		files := parquetSource(t, root+"/"+topic+"/**/*.parquet")
		if files == "" {
			t.Fatalf("the lake holds no file of %s", topic)
		}
		return "read_parquet(" + files + ", hive_partitioning=true)"
	}
	logs, clickRows := source("logs"), source("clicks")
	var count, distinct, logCount, clickCount int64
	err := db.QueryRow(`SELECT count(*), count(DISTINCT event_id),
		count(*) FILTER (WHERE kind = 'log'), count(*) FILTER (WHERE kind = 'click')
		FROM (SELECT event_id, 'log' AS kind FROM `+logs+` UNION ALL SELECT event_id, 'click' FROM `+clickRows+`)`).
		Scan(&count, &distinct, &logCount, &clickCount)
	if err != nil {
		t.Fatal(err)
	}
	want, wantClicks := int64(lw.progress()), int64(clicks)
	t.Logf("lake: count(*) = %d, count(DISTINCT event_id) = %d (%d log rows, %d click rows)", count, distinct, logCount, clickCount)
	if count != want+wantClicks || distinct != count || logCount != want {
		t.Errorf("lake: count(*) = %d, count(DISTINCT event_id) = %d, log rows %d, click rows %d; want %d, %d, %d, %d",
			count, distinct, logCount, clickCount, want+wantClicks, want+wantClicks, want, wantClicks)
	}

	rows, err := db.Query(`SELECT line, count(*) FROM ` + logs + ` GROUP BY line`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	landed := make(map[string]int, want)
	for rows.Next() {
		var line string
		var n int
		if err := rows.Scan(&line, &n); err != nil {
			t.Fatal(err)
		}
		landed[line] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var problems []string
	for _, s := range lw.streams {
		for seq := range s.seq {
			line := testLine(s.id, seq)
			if n := landed[line]; n != 1 {
				problems = append(problems, fmt.Sprintf("%q landed %d times", line, n))
			}
			delete(landed, line)
		}
	}
	for line, n := range landed {
		problems = append(problems, fmt.Sprintf("%q landed %d times but was never written", line, n))
	}
	if len(problems) > 0 {
		t.Errorf("%d lines not landed exactly once, e.g.:\n%s", len(problems), strings.Join(problems[:min(10, len(problems))], "\n"))
	}
}

// lineHours counts the lines lw wrote by the hour they name.
func lineHours(lw *logWriter) map[time.Time]int64 {
	hours := map[time.Time]int64{}
	for _, s := range lw.streams {
		for seq := range s.seq {
			hours[testLineTime(seq).Truncate(time.Hour)]++
		}
	}
	return hours
}

func sortedHours(hours map[time.Time]int64) []time.Time {
	out := make([]time.Time, 0, len(hours))
	for h := range hours {
		out = append(out, h)
	}
	slices.SortFunc(out, time.Time.Compare)
	return out
}

// checkExactlyOnceAudit runs `millrace audit --json` and asserts that every
// (topic, source, hour) adds up with the exact totals and is judged ok: the
// clicks' hour and the lines' hours (logHours, the lines written per hour
// they name) are complete (their _SUCCESS markers exist, or the tables'
// offsets are at the topics' ends). Each log hour accepts and lands
// exactly the lines that name it. Tables are audited through the catalog
// flags, as the sinks landed them.
//
// logRecords and clickRecords are what the topics hold: every repeat in them
// must be counted as deduplicated, and the beacon's accepted count must be
// what the broker acknowledged, retries included — unless s killed the
// beacon: its killed run's last counts may then be missing, and the clicks'
// hour is unknown (the audit names the run) instead of ok, never a mismatch.
func checkExactlyOnceAudit(t *testing.T, b *broker, lake string, s exactlyOnceScenario, clickHour time.Time, logHours map[time.Time]int64, logRecords, clickRecords int64) {
	t.Helper()
	lines, clicks := int64(s.lines), int64(s.clicks)
	args := []string{"audit", "-b", b.addr, "--lake", lake, "--since", "48h"}
	if s.format == "iceberg" {
		args = append(args, "--catalog", "sqlite", "--namespace", "millrace")
	}
	out, code := runAudit(t, append(args, "--json")...)
	if code != 0 {
		t.Fatalf("millrace audit exited %d:\n%s", code, out)
	}
	var report reconcile.Report
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	type sum struct{ accepted, landed, deduplicated, deadLettered int64 }
	sums := map[string]*sum{}
	logAccepted, logLanded := map[string]int64{}, map[string]int64{}
	for _, l := range report.Lines {
		topicSum := sums[l.Topic]
		if topicSum == nil {
			topicSum = &sum{}
			sums[l.Topic] = topicSum
		}
		topicSum.accepted += l.Accepted
		topicSum.landed += l.Landed
		topicSum.deduplicated += l.Deduplicated
		topicSum.deadLettered += l.DeadLettered
		expected := l.Landed + l.DeadLettered
		if !l.Distinct {
			expected += l.Deduplicated
		}
		// A killed beacon's uncounted clicks: fewer accepted than the
		// lake accounts for, which the audit says it cannot judge.
		uncounted := l.Topic == "clicks" && l.Status == reconcile.StatusUnknown && l.Accepted < expected
		var bad []string
		if expected != l.Accepted && !uncounted {
			bad = append(bad, "does not add up")
		}
		if l.SinkLanded != l.Landed || l.DeadLettered != 0 || l.NoID != 0 {
			bad = append(bad, "sink counts differ from the lake's, or rows were dead-lettered or had no id")
		}
		switch l.Topic {
		case "logs":
			logAccepted[l.Hour] += l.Accepted
			logLanded[l.Hour] += l.Landed
			if !l.Distinct || l.Status != reconcile.StatusOK || !strings.HasPrefix(l.Source, "e2e-1:") {
				bad = append(bad, "want a distinct tail source, complete (ok)")
			}
		case "clicks":
			if uncounted && !s.killBeacon {
				bad = append(bad, "unknown, but no beacon was killed")
			}
			if uncounted {
				t.Logf("clicks: unknown, as the killed beacon run did not publish its last counts: %s", l.Problem)
			}
			if l.Distinct || l.Status != reconcile.StatusOK && !uncounted || l.Source != "shop.example" || l.Hour != audit.Hour(clickHour) {
				bad = append(bad, fmt.Sprintf("want a beacon source shop.example, complete (ok) in hour %s", audit.Hour(clickHour)))
			}
		default:
			bad = append(bad, "unexpected topic")
		}
		if len(bad) > 0 {
			t.Errorf("audit line %+v: %s", l, strings.Join(bad, "; "))
		}
	}
	logs, cl := sums["logs"], sums["clicks"]
	if logs == nil || cl == nil {
		t.Fatalf("audit report without logs or clicks:\n%s", out)
	}
	t.Logf("audit: logs accepted %d, landed %d, deduplicated %d; clicks accepted %d, landed %d, deduplicated %d; %d lines, %d open, %d unknown",
		logs.accepted, logs.landed, logs.deduplicated, cl.accepted, cl.landed, cl.deduplicated, len(report.Lines), report.Open, report.Unknown)
	if logs.accepted != lines || logs.landed != lines {
		t.Errorf("audit of logs: accepted %d, landed %d; want %d and %d", logs.accepted, logs.landed, lines, lines)
	}
	for _, hour := range sortedHours(logHours) {
		h, want := audit.Hour(hour), logHours[hour]
		if logAccepted[h] != want || logLanded[h] != want {
			t.Errorf("audit of logs in hour %s: accepted %d, landed %d; want the %d lines that name it", h, logAccepted[h], logLanded[h], want)
		}
		delete(logAccepted, h)
	}
	if len(logAccepted) > 0 {
		t.Errorf("audit of logs: counts in hours no line names: %v", logAccepted)
	}
	if report.Open != 0 {
		t.Errorf("audit: %d hours still open; every hour of both topics should be complete", report.Open)
	}
	if logs.deduplicated != logRecords-lines {
		t.Errorf("audit of logs: %d deduplicated, but the topic holds %d repeats", logs.deduplicated, logRecords-lines)
	}
	// The sink's side is exact in every case: each record of the topic
	// landed or was counted as a repeat.
	if cl.landed != clicks || cl.landed+cl.deduplicated+cl.deadLettered != clickRecords {
		t.Errorf("audit of clicks: landed %d, deduplicated %d, dead-lettered %d; want landed %d, and landed + deduplicated + dead-lettered = %d (the topic's records)",
			cl.landed, cl.deduplicated, cl.deadLettered, clicks, clickRecords)
	}
	if cl.accepted != clickRecords && !(s.killBeacon && cl.accepted < clickRecords && report.Unknown > 0) {
		t.Errorf("audit of clicks: accepted %d; want %d, the topic's records (fewer only when a killed beacon run's counts are missing and the hour is unknown)",
			cl.accepted, clickRecords)
	}
	if cl.deduplicated == 0 {
		t.Error("audit of clicks: nothing deduplicated: no event answered 503 was delivered, so no retry was a repeat")
	}
	if report.Unreconciled != 0 || len(report.Unattributed) != 0 || report.SkippedRecords != 0 {
		t.Errorf("audit: %d hours unreconciled, unattributed %v, %d malformed records", report.Unreconciled, report.Unattributed, report.SkippedRecords)
	}
	// The text report says the same.
	text, code := runAudit(t, args...)
	if code != 0 || !strings.Contains(text, "0 hours not reconciled") {
		t.Errorf("millrace audit (text) exited %d:\n%s", code, text)
	}
}
