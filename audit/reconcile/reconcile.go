package reconcile

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/audit"
	"millrace/internal/clientauth"
	"millrace/sinks/store"
)

// Statuses of a Line.
const (
	// StatusOK: the hour is complete and its counts add up.
	StatusOK = "ok"
	// StatusOpen: the hour has no _SUCCESS marker yet (nor has any later
	// hour of the topic); events may still be on their way.
	StatusOpen = "open"
	// StatusMismatch: the hour is complete and its counts do not add up.
	StatusMismatch = "MISMATCH"
)

// Line is the audit of one (topic, source, hour).
type Line struct {
	Topic  string `json:"topic"`
	Source string `json:"source"`
	Hour   string `json:"hour"`
	// Accepted is what the agents had acknowledged (sum over agents).
	Accepted int64 `json:"accepted"`
	// Distinct is false when some agent counted repeats (beacon): then
	// deduplicated rows are part of what was accepted.
	Distinct bool `json:"distinct"`
	// Landed is the rows the lake's files hold (their footers).
	Landed int64 `json:"landed"`
	// SinkLanded is the rows the sinks say they landed; more than Landed
	// means files went missing from the lake.
	SinkLanded   int64  `json:"sink_landed"`
	Deduplicated int64  `json:"deduplicated"`
	DeadLettered int64  `json:"dead_lettered"`
	NoID         int64  `json:"no_id"`
	Status       string `json:"status"`
	// Problem says why a MISMATCH does not add up.
	Problem string `json:"problem,omitempty"`
}

// Report is the audit of a lake against _millrace.audit.
type Report struct {
	Lines []Line `json:"lines"`
	// Unreconciled counts the distinct (topic, hour)s with a MISMATCH line.
	Unreconciled int `json:"unreconciled_hours"`
	// Open counts the lines still open.
	Open int `json:"open"`
	// Unattributed lists lake directories whose files carry no source counts.
	Unattributed map[string]int64 `json:"unattributed,omitempty"`
	// SkippedRecords counts malformed audit records.
	SkippedRecords int       `json:"skipped_records,omitempty"`
	At             time.Time `json:"at"`
}

// Reconcile judges every (topic, source, hour) from since on that agents
// or the lake know of, for the topics that have agent records (a topic fed
// only by other producers is not audited). records are the latest audit
// records (Latest); topicFilter, when not empty, keeps one topic.
//
// An hour is judged once it is complete: its _SUCCESS marker exists, or a
// later hour's of the same topic does (a marker is written only when every
// partition is past the bucket's end plus the grace, so every earlier
// bucket is past it too; an hour whose rows were all dead-lettered gets no
// marker of its own). Then, with landed read from the lake:
//
//	distinct sources (tail):  accepted = landed + dead_lettered
//	other sources (beacon):   accepted = landed + deduplicated + dead_lettered
func Reconcile(records map[string]audit.Entry, lake *Lake, topicFilter string, since time.Time) *Report {
	type lineKey struct{ topic, source, hour string }
	lines := map[lineKey]*Line{}
	sinceHour := audit.Hour(since)
	get := func(topic, source, hour string) *Line {
		k := lineKey{topic, source, hour}
		l := lines[k]
		if l == nil {
			l = &Line{Topic: topic, Source: source, Hour: hour, Distinct: true}
			lines[k] = l
		}
		return l
	}
	audited := map[string]bool{}
	for _, e := range records {
		if e.Hour < sinceHour || (topicFilter != "" && e.Topic != topicFilter) {
			continue
		}
		l := get(e.Topic, e.Source, e.Hour)
		if e.Role == audit.RoleSink {
			l.SinkLanded += e.Landed
			l.Deduplicated += e.Deduplicated
			l.DeadLettered += e.DeadLettered
			l.NoID += e.NoID
			continue
		}
		audited[e.Topic] = true
		l.Accepted += e.Accepted
		l.Distinct = l.Distinct && e.Distinct
	}
	for topic, counts := range lake.Rows {
		if topicFilter != "" && topic != topicFilter {
			continue
		}
		for hour, m := range counts {
			if hour < sinceHour {
				continue
			}
			for source, n := range m {
				get(topic, source, hour).Landed += n
			}
		}
	}
	// The newest complete hour per topic: everything up to it is complete.
	newestComplete := map[string]string{}
	for topic, hours := range lake.Complete {
		for h := range hours {
			if h > newestComplete[topic] {
				newestComplete[topic] = h
			}
		}
	}
	r := &Report{Unattributed: map[string]int64{}}
	bad := map[[2]string]bool{}
	for _, l := range lines {
		if !audited[l.Topic] {
			continue
		}
		switch {
		case l.Hour > newestComplete[l.Topic]:
			l.Status = StatusOpen
			r.Open++
		default:
			l.Problem = problem(l)
			l.Status = StatusOK
			if l.Problem != "" {
				l.Status = StatusMismatch
				bad[[2]string{l.Topic, l.Hour}] = true
			}
		}
		r.Lines = append(r.Lines, *l)
	}
	r.Unreconciled = len(bad)
	for topic, dirs := range lake.Unattributed {
		if topicFilter == "" || topic == topicFilter {
			for d, n := range dirs {
				r.Unattributed[d] += n
			}
		}
	}
	slices.SortFunc(r.Lines, func(a, b Line) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Hour, b.Hour), cmp.Compare(a.Source, b.Source))
	})
	return r
}

// problem says why a complete line does not add up, or "".
func problem(l *Line) string {
	expected := l.Landed + l.DeadLettered
	formula := "landed + dead-lettered"
	if !l.Distinct {
		expected += l.Deduplicated
		formula = "landed + deduplicated + dead-lettered"
	}
	if expected == l.Accepted {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d accepted but %s = %d", l.Accepted, formula, expected)
	switch {
	case l.SinkLanded > l.Landed:
		fmt.Fprintf(&b, "; the sink landed %d rows but the lake holds %d: files are missing", l.SinkLanded, l.Landed)
	case expected < l.Accepted:
		fmt.Fprintf(&b, "; %d events lost", l.Accepted-expected)
	default:
		fmt.Fprintf(&b, "; %d rows too many", expected-l.Accepted)
	}
	return b.String()
}

// WriteText prints the report as a table, one line per topic, source and
// hour, then one sentence per line that does not reconcile.
func (r *Report) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "TOPIC\tSOURCE\tHOUR\tPRODUCED\tLANDED\tDEAD-LETTERED\tDEDUPLICATED\tNO-ID\tSTATUS\t")
	for _, l := range r.Lines {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t\n", l.Topic, l.Source, l.Hour,
			l.Accepted, l.Landed, l.DeadLettered, l.Deduplicated, l.NoID, l.Status)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, l := range r.Lines {
		if l.Status == StatusMismatch {
			fmt.Fprintf(w, "not reconciled: topic %s, source %s, hour %s: %s\n", l.Topic, l.Source, l.Hour, l.Problem)
		}
	}
	dirs := make([]string, 0, len(r.Unattributed))
	for d := range r.Unattributed {
		dirs = append(dirs, d)
	}
	slices.Sort(dirs)
	for _, d := range dirs {
		fmt.Fprintf(w, "not audited: %s has %d rows in files without source counts\n", d, r.Unattributed[d])
	}
	if r.SkippedRecords > 0 {
		fmt.Fprintf(w, "skipped %d malformed audit records\n", r.SkippedRecords)
	}
	_, err := fmt.Fprintf(w, "%d lines, %d open, %d hours not reconciled\n", len(r.Lines), r.Open, r.Unreconciled)
	return err
}

// Options says what Run audits.
type Options struct {
	// Brokers are the seed brokers of the cluster with the audit topic.
	Brokers []string
	// Security is the TLS and SASL settings of the connection to Brokers.
	// Default none: PLAINTEXT without authentication.
	Security clientauth.Settings
	// AuditTopic defaults to Topic.
	AuditTopic string
	// Lake is the sink's output store.
	Lake store.Store
	// Topic, when set, audits that data topic only.
	Topic string
	// Since is how far back to audit. Default 24h.
	Since time.Duration
	// Now defaults to time.Now.
	Now func() time.Time
}

// Run reads the audit topic from its start and the lake's footers and
// markers, and reconciles them (Reconcile).
func Run(ctx context.Context, o Options) (*Report, error) {
	if len(o.Brokers) == 0 || o.Lake == nil {
		return nil, errors.New("audit: brokers and a lake are required")
	}
	if o.AuditTopic == "" {
		o.AuditTopic = audit.Topic
	}
	if o.Since <= 0 {
		o.Since = 24 * time.Hour
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	now := o.Now().UTC()
	security, err := o.Security.Opts()
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	cl, err := kgo.NewClient(append(security, kgo.SeedBrokers(o.Brokers...), kgo.ClientID("millrace-audit"))...)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	defer cl.Close()
	entries, skipped, err := audit.Read(ctx, cl, o.AuditTopic)
	if err != nil {
		return nil, err
	}
	latest := audit.Latest(entries)
	since := now.Add(-o.Since).Truncate(time.Hour)
	topicSet := map[string]bool{}
	for _, e := range latest {
		if e.Role != audit.RoleSink && (o.Topic == "" || e.Topic == o.Topic) {
			topicSet[e.Topic] = true
		}
	}
	topics := make([]string, 0, len(topicSet))
	for t := range topicSet {
		topics = append(topics, t)
	}
	slices.Sort(topics)
	// A day past now: events may carry times a little ahead of the clock.
	lake, err := ReadLake(ctx, o.Lake, topics, since, now.Add(24*time.Hour))
	if err != nil {
		return nil, err
	}
	r := Reconcile(latest, lake, o.Topic, since)
	r.SkippedRecords, r.At = skipped, now
	return r, nil
}
