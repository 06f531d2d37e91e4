package lake

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// syslogRow is the columns of a syslog row this test reads back with
// xitongsys/parquet-go (the reader takes the columns a struct names).
type syslogRow struct {
	EventID        *string `parquet:"name=event_id, type=BYTE_ARRAY, convertedtype=UTF8, repetitiontype=OPTIONAL"`
	Format         *string `parquet:"name=format, type=BYTE_ARRAY, convertedtype=UTF8, repetitiontype=OPTIONAL"`
	Facility       *int64  `parquet:"name=facility, type=INT64, repetitiontype=OPTIONAL"`
	Severity       *int64  `parquet:"name=severity, type=INT64, repetitiontype=OPTIONAL"`
	Timestamp      *int64  `parquet:"name=timestamp, type=INT64, repetitiontype=OPTIONAL"`
	Host           *string `parquet:"name=host, type=BYTE_ARRAY, convertedtype=UTF8, repetitiontype=OPTIONAL"`
	App            *string `parquet:"name=app, type=BYTE_ARRAY, convertedtype=UTF8, repetitiontype=OPTIONAL"`
	ProcID         *string `parquet:"name=procid, type=BYTE_ARRAY, convertedtype=UTF8, repetitiontype=OPTIONAL"`
	MsgID          *string `parquet:"name=msgid, type=BYTE_ARRAY, convertedtype=UTF8, repetitiontype=OPTIONAL"`
	StructuredData *string `parquet:"name=structured_data, type=BYTE_ARRAY, convertedtype=UTF8, repetitiontype=OPTIONAL"`
	Message        *string `parquet:"name=message, type=BYTE_ARRAY, convertedtype=UTF8, repetitiontype=OPTIONAL"`
	Raw            *string `parquet:"name=raw, type=BYTE_ARRAY, convertedtype=UTF8, repetitiontype=OPTIONAL"`
	ParseError     *string `parquet:"name=parse_error, type=BYTE_ARRAY, convertedtype=UTF8, repetitiontype=OPTIONAL"`
	ReceivedAt     int64   `parquet:"name=received_at, type=INT64"`
}

// TestSyslogRows: the JSON records agents/syslog writes land with
// --schema syslog, a column per field, in the hour of received_at (the
// hour the receiver's audit counts); a malformed message lands with its
// raw text and parse error; a record sent again (same event_id) is
// dropped.
func TestSyslogRows(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	w, c, d := otelWorker(t, root, "syslog", "syslog", nil)
	received := base.Add(90 * time.Minute)
	// As agents/syslog writes them (its Record; the sinks may not import
	// the agents): RFC 5424 §6.5's third example, RFC 3164 §5.4's first
	// (no year: the one nearest the receipt), and a message without a PRI.
	at := `"received_at":"2024-05-01T11:30:00Z","sender":"127.0.0.1:5000","transport":"udp"`
	values := []string{
		`{"event_id":"0190a3b4-0000-7000-8000-000000000000","format":"rfc5424","facility":20,"facility_name":"local4",` +
			`"severity":5,"severity_name":"notice","timestamp":"2003-10-11T22:14:15.003Z","host":"mymachine.example.com",` +
			`"app":"evntslog","msgid":"ID47","structured_data":{"exampleSDID@32473":{"eventID":"1011","eventSource":"Application","iut":"3"}},` +
			`"message":"An application event log entry...",` + at + `}`,
		`{"event_id":"0190a3b4-0000-7000-8000-000000000001","format":"rfc3164","facility":4,"facility_name":"auth",` +
			`"severity":2,"severity_name":"crit","timestamp":"2023-10-11T22:14:15Z","host":"mymachine","app":"su","procid":"99",` +
			`"message":"'su root' failed for lonvick on /dev/pts/8",` + at + `}`,
		`{"event_id":"0190a3b4-0000-7000-8000-000000000002","format":"","facility":1,"facility_name":"user","severity":5,` +
			`"severity_name":"notice","message":"","raw":"not syslog at all",` +
			`"parse_error":"the message does not start with a PRI (<0> to <191>)",` + at + `}`,
	}
	var recs []*kgo.Record
	for i, v := range values {
		recs = append(recs, &kgo.Record{Topic: "syslog", Offset: int64(i), Value: []byte(v), Timestamp: received})
	}
	recs = append(recs, &kgo.Record{Topic: "syslog", Offset: 3, Value: recs[0].Value, Timestamp: received})
	if err := feedTopic(w, "syslog", recs, 0); err != nil {
		t.Fatal(err)
	}
	if err := flushAll(w); err != nil {
		t.Fatal(err)
	}
	if len(d.sent) != 0 || strings.Join(c.log, " ") != "syslog/0@4" {
		t.Fatalf("dead letters %+v, commits %v", d.sent, c.log)
	}
	rows := readAll[syslogRow](t, root, "syslog")
	str := func(s *string) string {
		if s == nil {
			return "-"
		}
		return *s
	}
	var got []string
	for _, r := range rows {
		ts := "-"
		if r.Timestamp != nil {
			ts = time.UnixMicro(*r.Timestamp).UTC().Format(time.RFC3339Nano)
		}
		got = append(got, fmt.Sprintf("%s %s %d/%d %s %s %s %s %s %s | %s | raw=%s err=%v",
			str(r.EventID)[24:], str(r.Format), *r.Facility, *r.Severity, ts, str(r.Host), str(r.App), str(r.ProcID), str(r.MsgID),
			str(r.StructuredData), str(r.Message), str(r.Raw), r.ParseError != nil))
		if r.ReceivedAt != received.UnixMicro() {
			t.Errorf("received_at %d, want %d", r.ReceivedAt, received.UnixMicro())
		}
	}
	want := []string{
		`000000000000 rfc5424 20/5 2003-10-11T22:14:15.003Z mymachine.example.com evntslog - ID47 ` +
			`{"exampleSDID@32473":{"eventID":"1011","eventSource":"Application","iut":"3"}} | An application event log entry... | raw=- err=false`,
		`000000000001 rfc3164 4/2 2023-10-11T22:14:15Z mymachine su 99 - - | 'su root' failed for lonvick on /dev/pts/8 | raw=- err=false`,
		`000000000002  1/5 - - - - - - |  | raw=not syslog at all err=true`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("rows:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
