package syslog

import (
	"encoding/json"
	"testing"
	"time"
)

// FuzzParse checks that no message panics the parser, that every record
// encodes, and that a malformed message keeps its raw text.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"<34>1 2003-10-11T22:14:15.003Z mymachine.example.com su - ID47 - \xEF\xBB\xBF'su root' failed",
		`<165>1 2003-10-11T22:14:15.003Z h evntslog - ID47 [exampleSDID@32473 iut="3" eventSource="App\]"][p@1 class="high"] msg`,
		"<13>1 - - - - - -",
		"<34>Oct 11 22:14:15 mymachine su: 'su root' failed",
		"<30>2026-12-04T17:30:00.123456+00:00 web1 sshd[812]: Accepted",
		"<189>52: *Mar  1 00:04:34.123: %SYS-5-CONFIG_I: Configured",
		"<187>53: Dec  4 17:30:00.456 UTC: %LINK-3-UPDOWN: up",
		"<166>Dec 04 2025 17:30:00: %ASA-6-302013: Built",
		"<13>Feb 29 12:00:00 h a[1] x",
		"hello", "<192>", "",
	} {
		f.Add([]byte(s))
	}
	now := time.Date(2026, 12, 4, 18, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, in []byte) {
		r := Parse(in, now, time.UTC)
		if _, err := json.Marshal(&r); err != nil {
			t.Fatalf("encoding the record of %q: %v", in, err)
		}
		if r.ParseError == "" && r.Raw != "" {
			t.Fatalf("raw %q without a parse_error for %q", r.Raw, in)
		}
		if r.ParseError != "" && r.Raw != string(in) {
			t.Fatalf("raw %q, want the input %q", r.Raw, in)
		}
		if r.Facility < 0 || r.Facility > 23 || r.Severity < 0 || r.Severity > 7 {
			t.Fatalf("facility %d severity %d for %q", r.Facility, r.Severity, in)
		}
	})
}
