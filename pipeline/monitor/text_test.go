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
