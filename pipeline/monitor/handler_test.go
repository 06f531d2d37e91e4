package monitor

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

type fixedSource Snapshot

func (f fixedSource) Latest() Snapshot { return Snapshot(f) }

func testSnapshot() Snapshot {
	return Snapshot{
		Seq: 3, Time: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC), IntervalSeconds: 2, Controller: 1,
		Brokers: []Broker{{ID: 1, Host: "127.0.0.1", Port: 9092, Disk: &Disk{LogBytes: 1536, UsableBytes: 2 << 30, TotalBytes: 4 << 30}},
			{ID: 2, Host: "127.0.0.1", Port: 9093}},
		Topics: []Topic{{Name: "clicks", ReplicationFactor: 1, Records: 500, ProduceRate: 12.5,
			Partitions: []Partition{{Partition: 0, Leader: 1, Replicas: []int32{1}, ISR: []int32{1}, EndOffset: 300}, {Partition: 1, Leader: 1, Replicas: []int32{1}, ISR: []int32{1}, EndOffset: 200}}}},
		Groups: []Group{{Name: "lake-clicks", State: "Stable", Members: 1, Lag: 42, ConsumeRate: 10,
			Topics: []GroupTopic{{Topic: "clicks", Lag: 42, ConsumeRate: 10}}}},
		Components:   []Component{{Kind: "sink", Name: "clicks", Source: "h:up", Unit: "rows/s", Rate: 3, Total: 90}},
		Problems:     []Problem{{Source: "h:tail", Topic: "applogs", Cause: "topic_missing", Message: "topic applogs does not exist"}},
		MetricsTopic: DefaultMetricsTopic,
	}
}

func TestHandlerServesPageAssetsAndSnapshot(t *testing.T) {
	srv := httptest.NewServer(Handler(fixedSource(testSnapshot()), nil))
	defer srv.Close()
	for _, tc := range []struct {
		path, contentType, contains string
		status                      int
	}{
		{"/console", "text/html", `<script src="/console/console.js">`, 200},
		{"/console/", "text/html", `id="groups"`, 200},
		{"/console/console.js", "text/javascript", "/console/api/snapshot", 200},
		{"/console/console.css", "text/css", ".chart", 200},
		{"/console/api/snapshot", "application/json", `"lake-clicks"`, 200},
		{"/console/api/snapshot", "application/json", `"problems":[{"source":"h:tail","topic":"applogs","cause":"topic_missing","message":"topic applogs does not exist"`, 200},
		{"/console/", "text/html", `id="problems"`, 200},
		{"/console/api/audit", "application/json", `"configured":false`, 200},
		{"/console/", "text/html", `id="audit"`, 200},
		{"/console/console.js", "text/javascript", "/console/api/audit", 200},
		{"/console/", "text/html", `id="lake-page"`, 200},
		{"/console/console.js", "text/javascript", "/console/api/lake", 200},
		{"/console/api/lake", "application/json", `"message":"no Iceberg tables`, 200},
		{"/console/nothing", "", "", 404},
	} {
		t.Run(tc.path, func(t *testing.T) {
			resp, err := http.Get(srv.URL + tc.path)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if tc.status != 200 {
				return
			}
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, tc.contentType) {
				t.Fatalf("Content-Type %q, want %s", ct, tc.contentType)
			}
			if !strings.Contains(string(body), tc.contains) {
				t.Fatalf("body lacks %q", tc.contains)
			}
		})
	}
	resp, err := http.Get(srv.URL + "/console/api/snapshot")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got Snapshot
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if got.Seq != 3 || got.Topics[0].Partitions[1].EndOffset != 200 || got.Groups[0].Lag != 42 || got.Components[0].Total != 90 {
		t.Fatalf("snapshot round trip: %+v", got)
	}
	if resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("snapshot may be cached: %q", resp.Header.Get("Cache-Control"))
	}
}

// The page loads nothing from elsewhere, so the console works offline.
func TestConsoleIsSelfContained(t *testing.T) {
	for _, name := range []string{"console/index.html", "console/console.js", "console/console.css"} {
		body, err := consoleFiles.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, remote := range []string{"http://", "https://", "//cdn", "@import"} {
			if i := strings.Index(string(body), remote); i >= 0 && !strings.Contains(string(body[i:min(len(body), i+40)]), "www.w3.org/2000/svg") {
				t.Fatalf("%s refers to %q", name, body[i:min(len(body), i+40)])
			}
		}
	}
}

func TestWriteText(t *testing.T) {
	var b strings.Builder
	if err := WriteText(&b, testSnapshot()); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range [][]string{
		{"clicks", "2", "1", "500", "12.5", "0", "0"},
		{"lake-clicks", "Stable", "1", "clicks", "42", "10.0"},
		{"clicks", "sink", "h:up", "3.0", "rows/s", "90"},
		{"1*", "127.0.0.1:9092", "-", "1.5KiB", "2.0GiB/4.0GiB"},
		{"2", "127.0.0.1:9093", "-", "-", "-"}, // did not answer DescribeLogDirs
	} {
		if !hasRow(out, want) {
			t.Fatalf("no row %q in:\n%s", want, out)
		}
	}
	if !strings.Contains(out, "\n! h:tail: topic applogs does not exist\n") {
		t.Fatalf("the problem is not shown:\n%s", out)
	}
	if strings.Contains(out, "\x1b") {
		t.Fatal("control codes in the text view")
	}

	// The first read has no rates: they show as "-", not as 0.
	s := testSnapshot()
	s.IntervalSeconds = 0
	b.Reset()
	WriteText(&b, s)
	if !hasRow(b.String(), []string{"clicks", "2", "1", "500", "-", "0", "0"}) {
		t.Fatalf("rates shown without an interval:\n%s", b.String())
	}
}

func hasRow(out string, fields []string) bool {
	for _, line := range strings.Split(out, "\n") {
		if strings.Join(strings.Fields(line), " ") == strings.Join(fields, " ") {
			return true
		}
	}
	return false
}

func TestIECBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0B", 1023: "1023B", 1024: "1.0KiB", 6246: "6.1KiB",
		5 << 30: "5.0GiB", 1<<62 + 1<<61: "6.0EiB"} {
		if got := IECBytes(n); got != want {
			t.Errorf("IECBytes(%d) = %q, want %q", n, got, want)
		}
	}
}
