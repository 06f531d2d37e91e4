package ship

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/internal/clientauth"
)

// syncBuffer is a log destination written from the producer's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A record to a topic the broker does not have (and does not create) is
// logged with what to do, makes the shipper not ready, shows in Problems and
// in millrace_ship_problem; once the topic exists and a record to it is
// acknowledged, all of it clears.
func TestMissingTopicIsReported(t *testing.T) {
	c := newCluster(t) // no auto-creation
	var logs syncBuffer
	reg := prometheus.NewPedanticRegistry()
	s, err := New(Config{Brokers: c.ListenAddrs(), Linger: time.Millisecond}, reg, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	produce := func() error {
		errc := make(chan error, 1)
		s.Produce(ctx, &kgo.Record{Topic: "applogs", Value: []byte("x")}, func(_ *kgo.Record, err error) { errc <- err })
		return <-errc
	}
	began := time.Now()
	if err := produce(); !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("produce to a missing topic: %v", err)
	}
	t.Logf("the first record failed after %v", time.Since(began).Round(time.Millisecond))
	want := `topic applogs does not exist and the broker does not create topics on first use: run \"millrace topic create applogs\"`
	if !strings.Contains(logs.String(), want) {
		t.Fatalf("log lacks %q:\n%s", want, logs.String())
	}
	if err := s.Ready(ctx); err == nil || !strings.Contains(err.Error(), "topic applogs does not exist") {
		t.Fatalf("Ready with a missing topic: %v", err)
	}
	if err := s.ReadyFor(ctx, "clicks"); err != nil {
		t.Fatalf("ReadyFor another topic: %v", err)
	}
	if p := s.Problems(); len(p) != 1 || p[0].Topic != "applogs" || p[0].Cause != CauseTopicMissing || p[0].Failed != 1 {
		t.Fatalf("Problems: %+v", p)
	}
	if n, err := testutil.GatherAndCount(reg, "millrace_ship_problem"); err != nil || n != 1 {
		t.Fatalf("millrace_ship_problem series: %d, %v", n, err)
	}
	adm := kadm.NewClient(s.client.Load())
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "applogs"); err != nil {
		t.Fatal(err)
	}
	if err := produce(); err != nil {
		t.Fatalf("produce once the topic exists: %v", err)
	}
	t.Logf("the record after the topic's creation was acknowledged after %v", time.Since(began).Round(time.Millisecond))
	if p := s.Problems(); len(p) != 0 {
		t.Fatalf("Problems after an acknowledged record: %+v", p)
	}
	if err := s.Ready(ctx); err != nil {
		t.Fatalf("Ready after an acknowledged record: %v", err)
	}
	if !strings.Contains(logs.String(), `msg="records ship again" component=ship topic=applogs`) {
		t.Fatalf("no line for the recovery:\n%s", logs.String())
	}
	want0 := `millrace_ship_problem{cause="topic_missing",message=` // value checked below
	if body := gatherText(t, reg); !strings.Contains(body, want0) || !strings.Contains(body, `topic="applogs"} 0`) {
		t.Fatalf("millrace_ship_problem after recovery:\n%s", body)
	}
}

func gatherText(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, f := range fams {
		if f.GetName() != "millrace_ship_problem" {
			continue
		}
		for _, m := range f.GetMetric() {
			b.WriteString("millrace_ship_problem{")
			for i, l := range m.GetLabel() {
				if i > 0 {
					b.WriteByte(',')
				}
				fmt.Fprintf(&b, "%s=%q", l.GetName(), l.GetValue())
			}
			fmt.Fprintf(&b, "} %g\n", m.GetGauge().GetValue())
		}
	}
	return b.String()
}

// The log is rate limited per topic and cause: at once, then once per
// problemLogEvery with the records failed meanwhile; an acknowledged record
// ends its topic's problems; a problem whose topic saw no record for
// problemExpiry is no longer reported.
func TestProblemLogRateLimit(t *testing.T) {
	var logs syncBuffer
	p := newProblems(Config{}.WithDefaults(), slog.New(slog.NewTextHandler(&logs, nil)))
	t0 := time.Unix(1_800_000_000, 0)
	missing := fmt.Errorf("wrapped: %w", kerr.UnknownTopicOrPartition)
	for i := range 30 {
		p.failed("a", missing, t0.Add(time.Duration(i)*time.Second)) // 0..29 s: one line
	}
	p.failed("b", missing, t0.Add(30*time.Second))                       // another topic: its own line
	p.failed("a", kerr.TopicAuthorizationFailed, t0.Add(31*time.Second)) // another cause: its own line
	p.failed("a", missing, t0.Add(61*time.Second))                       // a minute on: a line for the 30 since
	if p.failed("a", kerr.NotLeaderForPartition, t0) {
		t.Fatal("a retriable leader change counted as a problem")
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines, want 4:\n%s", len(lines), logs.String())
	}
	if !strings.Contains(lines[3], "failed_records=30") {
		t.Fatalf("the line a minute on should count the 30 records since the first: %s", lines[3])
	}
	if got := p.current(t0.Add(62 * time.Second)); len(got) != 3 {
		t.Fatalf("current: %+v", got)
	}
	if got := p.current(t0.Add(62*time.Second), "b"); len(got) != 1 || got[0].Topic != "b" {
		t.Fatalf("current for b: %+v", got)
	}
	// A record to b acknowledged ends b's problem only.
	p.acknowledged("b")
	if got := p.current(t0.Add(62 * time.Second)); len(got) != 2 || got[0].Topic != "a" || got[1].Topic != "a" {
		t.Fatalf("current after b's record was acknowledged: %+v", got)
	}
	if got := p.current(t0.Add(61*time.Second + problemExpiry + time.Second)); len(got) != 0 {
		t.Fatalf("current long after the last failure: %+v", got)
	}
}

// Each cause's message names the fix; the principal comes from the
// shipper's SASL user.
func TestProblemMessages(t *testing.T) {
	no := false
	sasl := Config{Security: clientauth.Settings{SASL: &clientauth.SASL{Username: "tailer"}}}.WithDefaults()
	for _, tc := range []struct {
		cfg   Config
		cause Cause
		want  string
	}{
		{Config{}.WithDefaults(), CauseTopicMissing, `run "millrace topic create applogs", or allow auto-creation (auto.create.topics.enable=true`},
		{Config{AutoCreateTopics: &no}.WithDefaults(), CauseTopicMissing, `auto_create_topics is false`},
		{sasl, CauseTopicDenied, `millrace acl add --allow-principal User:tailer --operation Write --topic applogs`},
		{sasl, CauseClusterDenied, `--operation IdempotentWrite --cluster`},
		{sasl, CauseAuthFailed, `check sasl:`},
		{sasl, CauseInvalidTopic, `is not valid`},
	} {
		if got := tc.cfg.explain(tc.cause, "applogs"); !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q lacks %q", tc.cause, got, tc.want)
		}
	}
}
