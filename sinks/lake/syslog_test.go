package lake

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/agents/syslog"
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
	var recs []*kgo.Record
	for i, msg := range []string{
		// RFC 5424 §6.5's example 3, with structured data.
		`<165>1 2003-10-11T22:14:15.003Z mymachine.example.com evntslog - ID47 [exampleSDID@32473 iut="3" eventSource="Application" eventID="1011"] An application event log entry...`,
		`<34>Oct 11 22:14:15 mymachine su[99]: 'su root' failed for lonvick on /dev/pts/8`, // RFC 3164 §5.4's first example; no year: the one nearest the receipt
		`not syslog at all`,
	} {
		rec := syslog.Parse([]byte(msg), received, time.UTC)
		rec.EventID = fmt.Sprintf("0190a3b4-0000-7000-8000-%012d", i)
		rec.ReceivedAt, rec.Sender, rec.Transport = received, "127.0.0.1:5000", "udp"
		value, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Topic: "syslog", Offset: int64(i), Value: value, Timestamp: received})
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
