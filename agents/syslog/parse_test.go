package syslog

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// receiver is the zone and clock 3164 timestamps are read with in the tests.
var (
	receiver = time.FixedZone("CET", 3600)
	now      = time.Date(2026, time.December, 4, 18, 0, 0, 0, receiver)
)

// parseCase is a message and the record it gives. ts is the timestamp in
// UTC (RFC 3339), "" for none.
type parseCase struct {
	name string
	in   string
	now  time.Time // zero: now
	ts   string
	want Record
}

func runParseCases(t *testing.T, cases []parseCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			at := tc.now
			if at.IsZero() {
				at = now
			}
			got := Parse([]byte(tc.in), at, receiver)
			ts := ""
			if got.Timestamp != nil {
				ts = got.Timestamp.UTC().Format(time.RFC3339Nano)
			}
			if ts != tc.ts {
				t.Errorf("timestamp = %q, want %q", ts, tc.ts)
			}
			got.Timestamp = nil
			if tc.want.ParseError == "?" && got.ParseError != "" {
				tc.want.ParseError = got.ParseError
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Parse(%q)\n got %+v\nwant %+v", tc.in, got, tc.want)
			}
		})
	}
}

// rec builds an expected record.
func rec(format string, pri int, host, app, procid, msgid, message string) Record {
	r := Record{Format: format, Host: host, App: app, ProcID: procid, MsgID: msgid, Message: message}
	r.setPriority(pri)
	return r
}

func withSD(r Record, sd map[string]map[string]string) Record {
	r.StructuredData = sd
	return r
}

func malformed(format string, pri int, raw string) Record {
	r := Record{Format: format}
	r.setPriority(pri)
	r.fail([]byte(raw), "?")
	return r
}

func TestParse5424(t *testing.T) {
	t.Parallel()
	const bom = "\xEF\xBB\xBF"
	runParseCases(t, []parseCase{
		// RFC 5424 §6.5, example 1: no structured data, BOM before MSG.
		{name: "rfc example 1", in: "<34>1 2003-10-11T22:14:15.003Z mymachine.example.com su - ID47 - " + bom + "'su root' failed for lonvick on /dev/pts/8",
			ts: "2003-10-11T22:14:15.003Z", want: rec(Format5424, 34, "mymachine.example.com", "su", "", "ID47", "'su root' failed for lonvick on /dev/pts/8")},
		// Example 2: microseconds and a negative offset, no BOM.
		{name: "rfc example 2", in: "<165>1 2003-08-24T05:14:15.000003-07:00 192.0.2.1 myproc 8710 - - %% It's time to make the do-nuts.",
			ts: "2003-08-24T12:14:15.000003Z", want: rec(Format5424, 165, "192.0.2.1", "myproc", "8710", "", "%% It's time to make the do-nuts.")},
		// Example 3: one SD element with three parameters.
		{name: "rfc example 3", in: `<165>1 2003-10-11T22:14:15.003Z mymachine.example.com evntslog - ID47 [exampleSDID@32473 iut="3" eventSource="Application" eventID="1011"] ` + bom + "An application event log entry...",
			ts: "2003-10-11T22:14:15.003Z", want: withSD(rec(Format5424, 165, "mymachine.example.com", "evntslog", "", "ID47", "An application event log entry..."),
				map[string]map[string]string{"exampleSDID@32473": {"iut": "3", "eventSource": "Application", "eventID": "1011"}})},
		// Example 4: two SD elements and no MSG.
		{name: "rfc example 4", in: `<165>1 2003-10-11T22:14:15.003Z mymachine.example.com evntslog - ID47 [exampleSDID@32473 iut="3" eventSource="Application" eventID="1011"][examplePriority@32473 class="high"]`,
			ts: "2003-10-11T22:14:15.003Z", want: withSD(rec(Format5424, 165, "mymachine.example.com", "evntslog", "", "ID47", ""),
				map[string]map[string]string{"exampleSDID@32473": {"iut": "3", "eventSource": "Application", "eventID": "1011"}, "examplePriority@32473": {"class": "high"}})},
		// util-linux logger --rfc5424 (2.38): timeQuality and a zone offset.
		{name: "logger rfc5424", in: `<13>1 2026-12-04T17:30:00.123456+01:00 web1 alice - - [timeQuality tzKnown="1" isSynced="1" syncAccuracy="120500"] hello world`,
			ts: "2026-12-04T16:30:00.123456Z", want: withSD(rec(Format5424, 13, "web1", "alice", "", "", "hello world"),
				map[string]map[string]string{"timeQuality": {"tzKnown": "1", "isSynced": "1", "syncAccuracy": "120500"}})},
		// §6.3.3: '"', '\' and ']' are escaped; a '\' before anything else stays.
		{name: "sd escapes", in: `<14>1 2026-12-04T17:30:00Z h a 1 m [x@1 v="q\"b\\c\]d\e" w=""] msg`,
			ts: "2026-12-04T17:30:00Z", want: withSD(rec(Format5424, 14, "h", "a", "1", "m", "msg"),
				map[string]map[string]string{"x@1": {"v": `q"b\c]d\e`, "w": ""}})},
		// rsyslog's RSYSLOG_SyslogProtocol23Format: every field NILVALUE.
		{name: "all nil", in: "<13>1 - - - - - -", want: rec(Format5424, 13, "", "", "", "", "")},
		{name: "nil and message", in: "<0>1 - - - - - - kernel panic", want: rec(Format5424, 0, "", "", "", "", "kernel panic")},
		{name: "bad timestamp", in: "<13>1 2026-13-01T00:00:00Z h a - - - m", want: malformed(Format5424, 13, "<13>1 2026-13-01T00:00:00Z h a - - - m")},
		{name: "7 fraction digits", in: "<13>1 2026-12-01T00:00:00.1234567Z h a - - - m", want: malformed(Format5424, 13, "<13>1 2026-12-01T00:00:00.1234567Z h a - - - m")},
		{name: "lower-case t", in: "<13>1 2026-12-01t00:00:00Z h a - - - m", want: malformed(Format5424, 13, "<13>1 2026-12-01t00:00:00Z h a - - - m")},
		{name: "unclosed sd", in: `<13>1 - h a - - [x@1 a="b"`, want: malformed(Format5424, 13, `<13>1 - h a - - [x@1 a="b"`)},
		{name: "unclosed value", in: `<13>1 - h a - - [x@1 a="b] m`, want: malformed(Format5424, 13, `<13>1 - h a - - [x@1 a="b] m`)},
		{name: "sd not sd", in: `<13>1 - h a - - hello`, want: malformed(Format5424, 13, `<13>1 - h a - - hello`)},
		{name: "short header", in: `<13>1 - h a`, want: malformed(Format5424, 13, `<13>1 - h a`)},
		{name: "long app-name", in: "<13>1 - h " + strings.Repeat("a", 49) + " - - - m", want: malformed(Format5424, 13, "<13>1 - h "+strings.Repeat("a", 49)+" - - - m")},
		{name: "version 2", in: "<13>2 - h a - - - m", want: malformed(Format5424, 13, "<13>2 - h a - - - m")},
	})
}

func TestParse3164(t *testing.T) {
	t.Parallel()
	runParseCases(t, []parseCase{
		// RFC 3164 §5.4's first example.
		{name: "rfc example", in: "<34>Oct 11 22:14:15 mymachine su: 'su root' failed for lonvick on /dev/pts/8",
			ts: "2026-10-11T21:14:15Z", want: rec(Format3164, 34, "mymachine", "su", "", "", "'su root' failed for lonvick on /dev/pts/8")},
		// util-linux logger --rfc3164 -n: space-padded day.
		{name: "logger rfc3164", in: "<13>Dec  4 17:30:00 web1 alice: hello",
			ts: "2026-12-04T16:30:00Z", want: rec(Format3164, 13, "web1", "alice", "", "", "hello")},
		// rsyslog's RSYSLOG_TraditionalForwardFormat.
		{name: "rsyslog traditional", in: "<30>Dec  4 17:30:00 web1 systemd[1]: Started Session 4 of user root.",
			ts: "2026-12-04T16:30:00Z", want: rec(Format3164, 30, "web1", "systemd", "1", "", "Started Session 4 of user root.")},
		// rsyslog's RSYSLOG_ForwardFormat: RFC 3339 where 3164 has its date.
		{name: "rsyslog forward", in: "<86>2026-12-04T17:30:00.123456+00:00 web1 sshd[812]: Accepted publickey for root",
			ts: "2026-12-04T17:30:00.123456Z", want: rec(Format3164, 86, "web1", "sshd", "812", "", "Accepted publickey for root")},
		// A local socket's format relayed: no hostname.
		{name: "no hostname", in: "<38>Dec  4 17:30:00 sshd[812]: Accepted",
			ts: "2026-12-04T16:30:00Z", want: rec(Format3164, 38, "", "sshd", "812", "", "Accepted")},
		{name: "no hostname kernel", in: "<4>Dec 04 17:30:00 kernel: [ 1.234] usb 1-1: new device",
			ts: "2026-12-04T16:30:00Z", want: rec(Format3164, 4, "", "kernel", "", "", "[ 1.234] usb 1-1: new device")},
		// Cisco IOS: sequence number, unsynchronised clock '*', milliseconds, ':'.
		{name: "cisco ios", in: "<189>52: *Mar  1 00:04:34.123: %SYS-5-CONFIG_I: Configured from console by vty0",
			ts: "2026-02-28T23:04:34.123Z", want: rec(Format3164, 189, "", "%SYS-5-CONFIG_I", "", "", "Configured from console by vty0")},
		// Cisco IOS with "service timestamps log datetime msec show-timezone".
		{name: "cisco ios zone", in: "<187>53: Dec  4 17:30:00.456 UTC: %LINK-3-UPDOWN: Interface Gi0/1, changed state to up",
			ts: "2026-12-04T16:30:00.456Z", want: rec(Format3164, 187, "", "%LINK-3-UPDOWN", "", "", "Interface Gi0/1, changed state to up")},
		// Cisco ASA: a year in the date, ':' after the clock.
		{name: "cisco asa", in: "<166>Dec 04 2025 17:30:00: %ASA-6-302013: Built outbound TCP connection 1",
			ts: "2025-12-04T16:30:00Z", want: rec(Format3164, 166, "", "%ASA-6-302013", "", "", "Built outbound TCP connection 1")},
		// §4.3.2: no timestamp, everything is MSG.
		{name: "no timestamp", in: "<13>hello world", want: rec(Format3164, 13, "", "", "", "", "hello world")},
		{name: "no timestamp tag", in: "<13>app: hello", want: rec(Format3164, 13, "", "app", "", "", "hello")},
		{name: "empty", in: "<13>", want: rec(Format3164, 13, "", "", "", "", "")},
		// The year is the one nearest the receipt.
		{name: "december read in january", in: "<13>Dec 31 23:59:59 h a: x", now: time.Date(2027, 1, 1, 0, 0, 10, 0, receiver),
			ts: "2026-12-31T22:59:59Z", want: rec(Format3164, 13, "h", "a", "", "", "x")},
		{name: "january read in december", in: "<13>Jan  1 00:00:01 h a: x", now: time.Date(2026, 12, 31, 23, 59, 0, 0, receiver),
			ts: "2026-12-31T23:00:01Z", want: rec(Format3164, 13, "h", "a", "", "", "x")},
		{name: "feb 29 leap year", in: "<13>Feb 29 12:00:00 h a: x", now: time.Date(2028, 3, 1, 0, 0, 0, 0, receiver),
			ts: "2028-02-29T11:00:00Z", want: rec(Format3164, 13, "h", "a", "", "", "x")},
		{name: "bad clock", in: "<13>Dec  4 25:30:00 h a: x", want: rec(Format3164, 13, "", "", "", "", "Dec  4 25:30:00 h a: x")},
	})
}

func TestParseMalformedPRI(t *testing.T) {
	t.Parallel()
	runParseCases(t, []parseCase{
		{name: "no pri", in: "hello", want: malformed("", 13, "hello")},
		{name: "pri 192", in: "<192>1 - - - - - -", want: malformed("", 13, "<192>1 - - - - - -")},
		{name: "pri 4 digits", in: "<0013>x", want: malformed("", 13, "<0013>x")},
		{name: "pri unclosed", in: "<13", want: malformed("", 13, "<13")},
		{name: "empty", in: "", want: malformed("", 13, "")},
	})
}
