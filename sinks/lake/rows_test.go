package lake

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"millrace/sinks/parquet"
	"millrace/sinks/parquet/parquettest"
)

// otelWorker is a test worker landing topic with the OTLP schema schema.
func otelWorker(t *testing.T, root, topic, schema string, mod func(*Config)) (*Worker, *fakeCommitter, *fakeDeadLetters) {
	return testWorker(t, root, func(c *Config) {
		c.Topics, c.Schema = []string{topic}, schema
		if mod != nil {
			mod(c)
		}
	})
}

// feedTopic processes recs[from:] of partition 0 of topic, as the group
// would deliver them after a commit at from, stopping at the first error.
func feedTopic(w *Worker, topic string, recs []*kgo.Record, from int64) error {
	w.landing.Lock()
	defer w.landing.Unlock()
	p := w.assign(topicPartition{topic, 0})
	for _, r := range recs[from:] {
		if err := w.processRecord(context.Background(), p, r); err != nil {
			return err
		}
	}
	return nil
}

// logID is the event_id agents/otlp would give log record n (a UUID).
func logID(n int) string {
	return uuid.NewSHA1(uuid.NameSpaceOID, []byte(fmt.Sprint(n))).String()
}

// otlpLogs builds a request of one resource (service) with a log record
// per entry of ids, each at hour hours[i] after base; a negative id has
// no event_id attribute.
func otlpLogs(service string, ids []int, hours []int) plog.Logs {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("service.name", service)
	rl.Resource().Attributes().PutStr("host.name", "h1")
	sl := rl.ScopeLogs().AppendEmpty()
	sl.Scope().SetName("test-scope")
	sl.Scope().SetVersion("1.2")
	for i, id := range ids {
		lr := sl.LogRecords().AppendEmpty()
		ts := base.Add(time.Duration(hours[i])*time.Hour + time.Duration(i)*time.Millisecond)
		lr.SetTimestamp(pcommon.NewTimestampFromTime(ts))
		lr.SetObservedTimestamp(pcommon.NewTimestampFromTime(ts.Add(time.Second)))
		lr.SetSeverityNumber(plog.SeverityNumberWarn)
		lr.SetSeverityText("WARN")
		lr.Body().SetStr(fmt.Sprintf("line %d", id))
		lr.SetTraceID(pcommon.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
		lr.SetSpanID(pcommon.SpanID{0xa, 0xb, 0xc, 0xd, 0xe, 0xf, 1, 2})
		lr.Attributes().PutInt("n", int64(id))
		if id >= 0 {
			lr.Attributes().PutStr("event_id", logID(id))
		}
	}
	return ld
}

// logRecord marshals ld as agents/otlp writes it (otlp_proto, or
// otlp_json when json is set) into record offset of topic otlp_logs.
func logRecord(t testing.TB, offset int64, ld plog.Logs, json bool) *kgo.Record {
	t.Helper()
	var value []byte
	var err error
	if json {
		value, err = new(plog.JSONMarshaler).MarshalLogs(ld)
	} else {
		value, err = new(plog.ProtoMarshaler).MarshalLogs(ld)
	}
	if err != nil {
		t.Fatal(err)
	}
	return &kgo.Record{Topic: "otlp_logs", Offset: offset, Value: value, Timestamp: base.Add(time.Duration(offset) * time.Second)}
}

// landedLogs reads every otel-logs row back with xitongsys/parquet-go, by
// file (relative name).
func landedLogs(t *testing.T, root string) map[string][]parquettest.OtelLogRow {
	t.Helper()
	files, err := filepath.Glob(root + "/otlp_logs/dt=*/hr=*/*.parquet")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]parquettest.OtelLogRow{}
	for _, f := range files {
		rows, err := parquet.ReadRows[parquettest.OtelLogRow](f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		out[rel] = rows
	}
	return out
}

// bodies lists the bodies of rows by file, sorted by file name.
func bodies(files map[string][]parquettest.OtelLogRow) string {
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, name := range names {
		b.WriteString(strings.TrimPrefix(name, "otlp_logs/") + ":")
		for _, r := range files[name] {
			b.WriteString(" " + *r.Body)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// TestOtelLogsRows: an OTLP log record lands a row per log record, in the
// files of their hours named by the record's offset, with every column
// taken from pdata; otlp_json lands like otlp_proto; a log record whose
// event_id was landed before is dropped while the others of its record
// land; a record that is not OTLP is one dead letter.
func TestOtelLogsRows(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	w, c, d := otelWorker(t, root, "otlp_logs", "otel-logs", nil)
	recs := []*kgo.Record{
		logRecord(t, 0, otlpLogs("checkout", []int{0, 1, 2}, []int{0, 1, 0}), false),
		logRecord(t, 1, otlpLogs("cart", []int{3, 4}, []int{1, 1}), true),
		{Topic: "otlp_logs", Offset: 2, Value: []byte("not otlp"), Timestamp: base},
		// A re-sent record: 1 and 4 again, and 5 new, without an id.
		logRecord(t, 3, otlpLogs("checkout", []int{1, 4, -5}, []int{1, 1, 0}), false),
	}
	if err := feedTopic(w, "otlp_logs", recs, 0); err != nil {
		t.Fatal(err)
	}
	if err := flushAll(w); err != nil {
		t.Fatal(err)
	}
	files := landedLogs(t, root)
	want := `dt=2024-05-01/hr=10/part-0-00000000000000000000-00000000000000000003.parquet: line 0 line 2 line -5
dt=2024-05-01/hr=11/part-0-00000000000000000000-00000000000000000001.parquet: line 1 line 3 line 4
`
	if got := bodies(files); got != want {
		t.Errorf("files:\n%s\nwant\n%s", got, want)
	}
	if strings.Join(c.log, " ") != "otlp_logs/0@4" {
		t.Errorf("commits: %v", c.log)
	}
	if len(d.sent) != 1 || d.sent[0].Offset != 2 || !strings.Contains(d.sent[0].Reason, "not an OTLP logs record (otlp_proto)") {
		t.Errorf("dead letters: %+v", d.sent)
	}
	r := files["otlp_logs/dt=2024-05-01/hr=10/part-0-00000000000000000000-00000000000000000003.parquet"][1]
	ts := base.Add(2 * time.Millisecond)
	checks := []struct {
		name      string
		got, want any
	}{
		{"event_id", *r.EventID, logID(2)},
		{"time", *r.Time, ts.UnixMicro()},
		{"observed_time", *r.ObservedTime, ts.Add(time.Second).UnixMicro()},
		{"severity_number", *r.SeverityNumber, int64(13)},
		{"severity_text", *r.SeverityText, "WARN"},
		{"trace_id", *r.TraceID, "0102030405060708090a0b0c0d0e0f10"},
		{"span_id", *r.SpanID, "0a0b0c0d0e0f0102"},
		{"flags", *r.Flags, int64(0)},
		{"attributes", fmt.Sprint(r.Attributes), "map[n:2]"},
		{"service_name", *r.ServiceName, "checkout"},
		{"resource_attributes", fmt.Sprint(r.ResourceAttributes), "map[host.name:h1 service.name:checkout]"},
		{"scope", *r.ScopeName + " " + *r.ScopeVersion, "test-scope 1.2"},
		{"event_name", r.EventName, (*string)(nil)},
	}
	for _, c := range checks {
		if fmt.Sprint(c.got) != fmt.Sprint(c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if noID := files["otlp_logs/dt=2024-05-01/hr=10/part-0-00000000000000000000-00000000000000000003.parquet"][2]; noID.EventID != nil {
		t.Errorf("a log record without event_id has %q", *noID.EventID)
	}
}

// TestOtelLogsRewriteAfterLostCommit: records of many log records each,
// a window's commit lost after its files were published (a crash in the
// middle of the stream), and the next owner starting from the committed
// offset with other cut points: every log record is in the lake exactly
// once, and each record's rows are in files of one window.
func TestOtelLogsRewriteAfterLostCommit(t *testing.T) {
	t.Parallel()
	var recs []*kgo.Record
	n := 0
	for i := range 30 {
		ids, hours := []int{}, []int{}
		for j := range 1 + i%7 { // 1 to 7 log records, over two hours
			ids, hours = append(ids, n), append(hours, (i+j)%2)
			n++
		}
		recs = append(recs, logRecord(t, int64(i), otlpLogs(fmt.Sprint("svc", i%3), ids, hours), i%4 == 0))
	}
	for _, rollRows := range []int64{5, 17, 1000} {
		t.Run(fmt.Sprint(rollRows), func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			w1, c1, _ := otelWorker(t, root, "otlp_logs", "otel-logs", func(c *Config) { c.RollRows = 20 })
			w1.cfg.AfterPublish = func(string) {
				if len(c1.log) == 1 {
					c1.fail = errors.New("crash")
				}
			}
			if err := feedTopic(w1, "otlp_logs", recs, 0); err == nil {
				t.Fatal("the lost commit was not reported")
			}
			committed := c1.offsets[topicPartition{"otlp_logs", 0}]
			if committed == 0 || committed >= int64(len(recs)) {
				t.Fatalf("committed %d", committed)
			}
			w2, _, _ := otelWorker(t, root, "otlp_logs", "otel-logs", func(c *Config) { c.RollRows = rollRows })
			if err := feedTopic(w2, "otlp_logs", recs, committed); err != nil {
				t.Fatal(err)
			}
			if err := flushAll(w2); err != nil {
				t.Fatal(err)
			}
			seen := map[string]int{}
			for name, rows := range landedLogs(t, root) {
				var first, last int64
				fmt.Sscanf(filepath.Base(name), "part-0-%020d-%020d.parquet", &first, &last)
				for _, r := range rows {
					seen[*r.EventID]++
					var k int
					fmt.Sscanf(*r.Body, "line %d", &k)
					if !recordBetween(recs, k, first, last) {
						t.Errorf("log record %d is in %s, outside its record", k, name)
					}
				}
			}
			if len(seen) != n {
				t.Errorf("%d distinct log records landed, want %d", len(seen), n)
			}
			for id, k := range seen {
				if k != 1 {
					t.Errorf("%s landed %d times", id, k)
				}
			}
		})
	}
}

// recordBetween reports whether log record k's record has an offset in
// [first, last].
func recordBetween(recs []*kgo.Record, k int, first, last int64) bool {
	for _, r := range recs {
		ld, err := new(plog.ProtoUnmarshaler).UnmarshalLogs(r.Value)
		if err != nil {
			ld, _ = new(plog.JSONUnmarshaler).UnmarshalLogs(r.Value)
		}
		lrs := ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords()
		for i := range lrs.Len() {
			if lrs.At(i).Body().Str() == fmt.Sprint("line ", k) {
				return r.Offset >= first && r.Offset <= last
			}
		}
	}
	return false
}
