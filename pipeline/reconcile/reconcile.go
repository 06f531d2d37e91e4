package reconcile

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/audit"
	"millrace/internal/clientauth"
	"millrace/sinks/iceberg"
	"millrace/sinks/lakeread"
	"millrace/store"
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
	// StatusUnknown: the hour is complete and the lake holds more than the
	// agents counted, but an agent that counted events of the topic was
	// killed before publishing its last counts, in a stretch of time the
	// hour's events may come from (see audit.Run): what was accepted is not
	// known, so neither is whether the hour adds up.
	StatusUnknown = "unknown"
)

// Line is the audit of one (topic, source, hour).
type Line struct {
	Topic  string `json:"topic"`
	Source string `json:"source"`
	Hour   string `json:"hour"`
	// Accepted is what the agents had acknowledged (sum over agents and
	// their runs).
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
	// Problem says why a MISMATCH does not add up, or why a line is unknown.
	Problem string `json:"problem,omitempty"`
}

// NotLanded is a topic the agents fed that no sink lands in any lake.
type NotLanded struct {
	Topic string `json:"topic"`
	// Accepted is what the agents accepted for it from the audit's start.
	Accepted int64 `json:"accepted"`
}

// Report is the audit of a lake against _millrace.audit.
type Report struct {
	// Lake is the lake's URL, when known.
	Lake  string `json:"lake,omitempty"`
	Lines []Line `json:"lines"`
	// Unreconciled counts the distinct (topic, hour)s with a MISMATCH line.
	Unreconciled int `json:"unreconciled_hours"`
	// Open counts the lines still open.
	Open int `json:"open"`
	// Unknown counts the lines whose accepted count is not known.
	Unknown int `json:"unknown,omitempty"`
	// NotLanded lists the topics agents fed that no sink announced it lands.
	NotLanded []NotLanded `json:"not_landed,omitempty"`
	// Elsewhere names, per topic agents fed that sinks land in other lakes
	// only, those lakes; such topics are not judged against this lake.
	Elsewhere map[string][]string `json:"landed_elsewhere,omitempty"`
	// Unattributed lists lake directories whose files carry no source counts.
	Unattributed map[string]int64 `json:"unattributed,omitempty"`
	// SkippedRecords counts malformed audit records.
	SkippedRecords int       `json:"skipped_records,omitempty"`
	At             time.Time `json:"at"`
}

// lineKey identifies a Line.
type lineKey struct{ topic, source, hour string }

// Failed reports whether the report found something wrong: an hour that
// does not reconcile or a topic that nothing lands.
func (r *Report) Failed() bool { return r.Unreconciled > 0 || len(r.NotLanded) > 0 }

// Input is what Reconcile judges.
type Input struct {
	// Records are the latest count records (audit.Latest).
	Records map[string]audit.Entry
	// Runs are the publishers' runs (audit.Log.Runs).
	Runs []audit.Run
	// Lake is what the lake holds, read for the topics Topics returns.
	Lake *Lake
	// LakeURL is the lake's canonical URL (store.CanonicalURL). When set,
	// only the topics a sink announced it lands there are judged; the
	// others are reported as landed elsewhere or not landed at all. When
	// empty, every topic agents fed is judged against Lake.
	LakeURL string
	// Topic, when not empty, keeps one topic.
	Topic string
	// Since is the first hour judged; Now is when the audit runs.
	Since, Now time.Time
}

// Topics are the data topics the input judges against its lake: the
// topics agents fed (and Topic, when set) that a sink lands in LakeURL.
func (in *Input) Topics() []string {
	var out []string
	lakes := in.sinkLakes()
	for _, t := range in.agentTopics() {
		if in.LakeURL == "" || slices.Contains(lakes[t], in.LakeURL) {
			out = append(out, t)
		}
	}
	return out
}

// agentTopics are the topics with agent records, sorted.
func (in *Input) agentTopics() []string {
	set := map[string]bool{}
	for _, e := range in.Records {
		if e.Role != audit.RoleSink && (in.Topic == "" || e.Topic == in.Topic) {
			set[e.Topic] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// sinkLakes maps each topic a sink announced to the lakes it lands in.
func (in *Input) sinkLakes() map[string][]string {
	out := map[string][]string{}
	for _, r := range in.Runs {
		if r.Role != audit.RoleSink {
			continue
		}
		for _, t := range r.Topics {
			if !slices.Contains(out[t], r.Lake) {
				out[t] = append(out[t], r.Lake)
			}
		}
	}
	return out
}

// Reconcile judges every (topic, source, hour) from in.Since on that agents
// or the lake know of, for the topics Topics returns (a topic fed only by
// other producers is not audited).
//
// An hour is judged once it is complete: its _SUCCESS marker exists, or a
// later hour's of the same topic does (a marker is written only when every
// partition is past the bucket's end plus the grace, so every earlier
// bucket is past it too; an hour whose rows were all dead-lettered gets no
// marker of its own). Then, with landed read from the lake:
//
//	distinct sources (tail):  accepted = landed + dead_lettered
//	other sources (beacon):   accepted = landed + deduplicated + dead_lettered
//
// A complete line with more rows than accepted events is unknown rather
// than a mismatch when an agent feeding its topic was killed before
// publishing counts of events that may belong to its hour: the accepted
// count is then a lower bound. Fewer rows than that bound is a loss
// whatever the agent did not publish, and stays a mismatch.
func Reconcile(in Input) *Report {
	lines := map[lineKey]*Line{}
	sinceHour := audit.Hour(in.Since)
	get := func(topic, source, hour string) *Line {
		k := lineKey{topic, source, hour}
		l := lines[k]
		if l == nil {
			l = &Line{Topic: topic, Source: source, Hour: hour, Distinct: true}
			lines[k] = l
		}
		return l
	}
	judged := map[string]bool{}
	for _, t := range in.Topics() {
		judged[t] = true
	}
	r := &Report{Lake: in.LakeURL, Unattributed: map[string]int64{}}
	if in.LakeURL != "" {
		lakes := in.sinkLakes()
		accepted := map[string]int64{}
		for _, e := range in.Records {
			if e.Role != audit.RoleSink {
				accepted[e.Topic] += e.Accepted
			}
		}
		for _, t := range in.agentTopics() {
			switch {
			case len(lakes[t]) == 0 && strings.HasPrefix(t, "_"):
				// millrace's own topics (_millrace.metrics) stay out of
				// the lake unless a sink names them.
			case len(lakes[t]) == 0:
				r.NotLanded = append(r.NotLanded, NotLanded{Topic: t, Accepted: accepted[t]})
			case !judged[t]:
				if r.Elsewhere == nil {
					r.Elsewhere = map[string][]string{}
				}
				r.Elsewhere[t] = slices.Sorted(slices.Values(lakes[t]))
			}
		}
	}
	roles := map[string]map[string]bool{} // the agent roles feeding each topic
	for _, e := range in.Records {
		if e.Hour < sinceHour || !judged[e.Topic] {
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
		if roles[e.Topic] == nil {
			roles[e.Topic] = map[string]bool{}
		}
		roles[e.Topic][e.Role] = true
		l.Accepted += e.Accepted
		l.Distinct = l.Distinct && e.Distinct
	}
	if in.Lake != nil {
		for topic, counts := range in.Lake.Rows {
			if !judged[topic] {
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
	}
	// The newest complete hour per topic: everything up to it is complete.
	newestComplete := map[string]string{}
	if in.Lake != nil {
		for topic, hours := range in.Lake.Complete {
			for h := range hours {
				if h > newestComplete[topic] {
					newestComplete[topic] = h
				}
			}
		}
	}
	killed := killedRuns(in.Runs, in.Now)
	foldUncounted(lines)
	others := foldedHours(lines)
	bad := map[[2]string]bool{}
	for _, l := range lines {
		switch {
		case l.Hour > newestComplete[l.Topic]:
			l.Status = StatusOpen
			r.Open++
		default:
			l.Problem = problem(l)
			sum := hourTotal{l.Accepted, expected(l)}
			if total, ok := others[[2]string{l.Topic, l.Hour}]; ok && (l.Source == audit.OtherSource || expected(l) > l.Accepted) {
				// Agents counted some of the hour's sources in (other):
				// those sources and (other) add up only together.
				sum = total
				l.Problem = total.problem()
			}
			l.Status = StatusOK
			if l.Problem == "" {
				break
			}
			if u, ok := uncountedFor(l, sum, killed, roles[l.Topic]); ok {
				l.Status = StatusUnknown
				l.Problem += "; but " + u.String()
				r.Unknown++
				break
			}
			l.Status = StatusMismatch
			bad[[2]string{l.Topic, l.Hour}] = true
		}
		r.Lines = append(r.Lines, *l)
	}
	r.Unreconciled = len(bad)
	if in.Lake != nil {
		for topic, dirs := range in.Lake.Unattributed {
			if judged[topic] {
				for d, n := range dirs {
					r.Unattributed[d] += n
				}
			}
		}
	}
	slices.SortFunc(r.Lines, func(a, b Line) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Hour, b.Hour), cmp.Compare(a.Source, b.Source))
	})
	return r
}

// foldUncounted moves, in each (topic, hour) with an audit.OtherSource
// count, the lines no agent counted on their own (sources agents folded)
// into the (other) line, so a report's lines are bounded by the agents'
// tables, not by the sources a client made up.
func foldUncounted(lines map[lineKey]*Line) {
	for k, l := range lines {
		if k.source == audit.OtherSource || l.Accepted != 0 {
			continue
		}
		other := lines[lineKey{k.topic, audit.OtherSource, k.hour}]
		if other == nil || other.Accepted == 0 {
			continue
		}
		other.Landed += l.Landed
		other.SinkLanded += l.SinkLanded
		other.Deduplicated += l.Deduplicated
		other.DeadLettered += l.DeadLettered
		other.NoID += l.NoID
		delete(lines, k)
	}
}

// hourTotal is what a topic's hour adds up to over all its sources.
type hourTotal struct{ accepted, expected int64 }

// foldedHours sums, for each (topic, hour) whose agents counted sources in
// audit.OtherSource, the accepted and expected counts of all its lines. A
// source counted on its own by one agent run and folded by another shows
// more rows than accepted; (other) shows accepted events and no rows of its
// own: together they are exact.
func foldedHours(lines map[lineKey]*Line) map[[2]string]hourTotal {
	out := map[[2]string]hourTotal{}
	for k, l := range lines {
		if k.source == audit.OtherSource && l.Accepted > 0 {
			out[[2]string{k.topic, k.hour}] = hourTotal{}
		}
	}
	for k, l := range lines {
		hk := [2]string{k.topic, k.hour}
		if t, ok := out[hk]; ok {
			t.accepted += l.Accepted
			t.expected += expected(l)
			out[hk] = t
		}
	}
	return out
}

// problem says why a line of a folded hour does not add up, or "": the
// hour's sources are judged together.
func (t hourTotal) problem() string {
	if t.accepted == t.expected {
		return ""
	}
	return fmt.Sprintf("some sources of this hour were counted in %s: all sources together have %d accepted but %d landed, deduplicated or dead-lettered",
		audit.OtherSource, t.accepted, t.expected)
}

// uncountedFor returns a killed run of an agent role feeding l's topic
// whose uncounted events may fall in l's hour, when sum (l's counts, or its
// folded hour's) holds more rows than were counted (fewer is a loss
// whatever the run did not publish).
func uncountedFor(l *Line, sum hourTotal, killed map[string][]uncounted, roles map[string]bool) (uncounted, bool) {
	if sum.expected < sum.accepted {
		return uncounted{}, false
	}
	h, err := audit.ParseHour(l.Hour)
	if err != nil {
		return uncounted{}, false
	}
	for role := range roles {
		for _, u := range killed[role] {
			if u.covers(h) {
				return u, true
			}
		}
	}
	return uncounted{}, false
}

// expected is what the lake's side of a line says was accepted.
func expected(l *Line) int64 {
	n := l.Landed + l.DeadLettered
	if !l.Distinct {
		n += l.Deduplicated
	}
	return n
}

// problem says why a complete line does not add up, or "".
func problem(l *Line) string {
	expected := expected(l)
	formula := "landed + dead-lettered"
	if !l.Distinct {
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
// hour, then one sentence per line that does not reconcile or is unknown,
// and per topic that is not landed.
func (r *Report) WriteText(w io.Writer) error {
	if r.Lake != "" {
		fmt.Fprintf(w, "lake %s\n", r.Lake)
	}
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
		switch l.Status {
		case StatusMismatch:
			fmt.Fprintf(w, "not reconciled: topic %s, source %s, hour %s: %s\n", l.Topic, l.Source, l.Hour, l.Problem)
		case StatusUnknown:
			fmt.Fprintf(w, "unknown: topic %s, source %s, hour %s: %s\n", l.Topic, l.Source, l.Hour, l.Problem)
		}
	}
	for _, n := range r.NotLanded {
		fmt.Fprintf(w, "not landed: topic %s: agents accepted %d events, but no sink announced that it lands the topic (run `millrace sink` for it, or add it to a sink's topics)\n", n.Topic, n.Accepted)
	}
	for _, t := range slices.Sorted(maps.Keys(r.Elsewhere)) {
		fmt.Fprintf(w, "landed elsewhere: topic %s lands in %s, not in this lake\n", t, strings.Join(r.Elsewhere[t], ", "))
	}
	for _, d := range slices.Sorted(maps.Keys(r.Unattributed)) {
		fmt.Fprintf(w, "not audited: %s has %d rows in files without source counts\n", d, r.Unattributed[d])
	}
	if r.SkippedRecords > 0 {
		fmt.Fprintf(w, "skipped %d malformed audit records\n", r.SkippedRecords)
	}
	_, err := fmt.Fprintf(w, "%d lines, %d open, %d unknown, %d hours not reconciled, %d topics not landed\n",
		len(r.Lines), r.Open, r.Unknown, r.Unreconciled, len(r.NotLanded))
	return err
}

// Options says what Load reads.
type Options struct {
	// Brokers are the seed brokers of the cluster with the audit topic.
	Brokers []string
	// Security is the TLS and SASL settings of the connection to Brokers.
	// Default none: PLAINTEXT without authentication.
	Security clientauth.Settings
	// AuditTopic defaults to audit.Topic.
	AuditTopic string
	// Topic, when set, audits that data topic only.
	Topic string
	// Since is how far back to audit. Default 24h.
	Since time.Duration
	// Now defaults to time.Now.
	Now func() time.Time
}

// Audit is the audit topic read once, ready to judge lakes against it.
type Audit struct {
	opts   Options // for the end offsets of tables' topics
	log    *audit.Log
	latest map[string]audit.Entry
	topic  string
	since  time.Time
	now    time.Time
}

// Load reads the audit topic from its start.
func Load(ctx context.Context, o Options) (*Audit, error) {
	if len(o.Brokers) == 0 {
		return nil, errors.New("audit: brokers are required")
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
	l, err := audit.Read(ctx, cl, o.AuditTopic)
	if err != nil {
		return nil, err
	}
	return &Audit{opts: o, log: l, latest: audit.Latest(l.Entries), topic: o.Topic,
		since: now.Add(-o.Since).Truncate(time.Hour), now: now}, nil
}

// Lakes are the URLs of the lakes sinks announced, sorted.
func (a *Audit) Lakes() []string {
	set := map[string]bool{}
	for _, r := range a.log.Runs {
		if r.Role == audit.RoleSink {
			set[r.Lake] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// Judge reads the lake st, whose canonical URL is lakeURL, for the topics
// sinks land there, and reconciles it (Reconcile). A lake directory with
// the default Iceberg catalog (catalog.db) is read as JudgeTables reads it.
func (a *Audit) Judge(ctx context.Context, st store.Store, lakeURL string) (*Report, error) {
	if dir, ok := strings.CutPrefix(lakeURL, "file://"); ok && lakeread.HasDefaultCatalog(dir) {
		cat, err := lakeread.OpenCatalog(ctx, iceberg.Config{Directory: dir})
		if err != nil {
			return nil, err
		}
		defer cat.Close()
		return a.JudgeTables(ctx, st, lakeURL, cat)
	}
	return a.JudgeTables(ctx, st, lakeURL, nil)
}

// JudgeTables is Judge for a lake whose topics may be Iceberg tables in
// cat (ReadLakeTables); nil reads every topic as Hive directories.
func (a *Audit) JudgeTables(ctx context.Context, st store.Store, lakeURL string, cat *lakeread.Catalog) (*Report, error) {
	in := Input{Records: a.latest, Runs: a.log.Runs, LakeURL: lakeURL, Topic: a.topic, Since: a.since, Now: a.now}
	tables := Tables{Catalog: cat, EndOffsets: a.endOffsets}
	// A day past now: events may carry times a little ahead of the clock.
	lake, err := ReadLakeTables(ctx, st, tables, in.Topics(), a.since, a.now.Add(24*time.Hour), a.now)
	if err != nil {
		return nil, err
	}
	in.Lake = lake
	r := Reconcile(in)
	r.SkippedRecords, r.At = a.log.Skipped, a.now
	return r, nil
}

// endOffsets lists the topics' end offsets on the audit's brokers.
func (a *Audit) endOffsets(ctx context.Context, topics []string) (map[string]map[int32]int64, error) {
	security, err := a.opts.Security.Opts()
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(append(security, kgo.SeedBrokers(a.opts.Brokers...), kgo.ClientID("millrace-audit"))...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	return EndOffsets(cl)(ctx, topics)
}
