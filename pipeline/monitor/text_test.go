package monitor

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestWriteMetricsTextEscapesAndLimits(t *testing.T) {
	h := NewHistory(10, time.Hour, 100)
	h.add(sample("myapp_queue_depth", map[string]string{"queue": "emails"}, "web-1", 0, 11))
	h.add(sample("evil\x1b[2Jname", map[string]string{"k\x07": "v\x1b[31m"}, "src\r", 0, 1.5))
	h.add(sample("zzz_last", nil, "web-1", 0, 1))
	var out bytes.Buffer
	if err := WriteMetricsText(&out, h.Series("", 2), "", h0.Add(90*time.Second)); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	t.Logf("\n%s", text)
	if strings.ContainsAny(text, "\x1b\x07\r") {
		t.Fatalf("control codes reached the terminal: %q", text)
	}
	for _, want := range []string{
		`"evil\x1b[2Jname"`, `"k\a"="v\x1b[31m"`, `"src\r"`,
		"myapp_queue_depth", `{queue="emails"}`, "web-1", "gauge", "11", "1m",
		"all series: 3 of 3 kept", "(1 more; narrow with --match or raise --limit)",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("no %q in:\n%s", want, text)
		}
	}
}

// TestWriteTextInputs: `millrace top` lists the inputs with their rates
// and errors, a stale one as stale, and escapes a source's control codes.
func TestWriteTextInputs(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	err := WriteText(&out, Snapshot{Inputs: []Input{
		{Name: "remote write", Source: "h:up", Unit: "samples/s", Rate: 12.5, Total: 300, ErrorUnit: "requests/s", ErrorRate: 0.5, Errors: 2},
		{Name: "syslog", Source: "evil\x1b[2J", Unit: "messages/s", Total: 7, ErrorUnit: "messages/s", Stale: true},
	}})
	if err != nil {
		t.Fatal(err)
	}
	text := out.String()
	if strings.ContainsAny(text, "\x1b") {
		t.Fatalf("control codes reached the terminal: %q", text)
	}
	rows := strings.Split(text[strings.Index(text, "INPUT"):], "\n")
	for i, want := range [][]string{
		{"INPUT", "SOURCE", "RATE", "TOTAL", "ERRORS"},
		{"remote write", "h:up", "12.5 samples/s", "300", "0.5 requests/s", "2"},
		{"syslog", `"evil\x1b[2J"`, "stale", "7"},
	} {
		for _, cell := range want {
			if !strings.Contains(rows[i], cell) {
				t.Errorf("row %d %q lacks %q", i, rows[i], cell)
			}
		}
	}
}
