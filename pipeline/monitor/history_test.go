package monitor

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

var h0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func sample(name string, labels map[string]string, source string, sec int, v float64) metricSample {
	return metricSample{Name: name, Kind: "gauge", Value: v, Labels: labels, TS: h0.Add(time.Duration(sec) * time.Second), Source: source}
}

func pointValues(p SeriesPoints) []float64 {
	var out []float64
	for _, pt := range p.Points {
		out = append(out, pt.V)
	}
	return out
}

func onlySeries(t *testing.T, h *History) SeriesInfo {
	t.Helper()
	l := h.Series("", 0)
	if len(l.Series) != 1 {
		t.Fatalf("%d series, want 1", len(l.Series))
	}
	return l.Series[0]
}

func TestHistoryKeepsARingPerSeries(t *testing.T) {
	h := NewHistory(4, time.Hour, 10)
	for i := range 7 {
		h.add(sample("q_depth", map[string]string{"q": "a"}, "web", i*10, float64(i)))
	}
	info := onlySeries(t, h)
	p, ok := h.Points(info.ID)
	if !ok {
		t.Fatal("no points")
	}
	if got := fmt.Sprint(pointValues(p)); got != "[3 4 5 6]" {
		t.Fatalf("points %s, want the last 4 oldest first", got)
	}
	if info.Last.V != 6 || !info.Last.T.Equal(h0.Add(60*time.Second)) {
		t.Fatalf("last %+v", info.Last)
	}
}

func TestHistoryOrderAndWindow(t *testing.T) {
	h := NewHistory(100, time.Minute, 10)
	add := func(sec int, v float64) { h.add(sample("m", nil, "s", sec, v)) }
	add(0, 1)
	add(30, 2)
	add(20, 99) // older than the newest: another partition's late copy
	add(30, 3)  // the same time: replaces
	add(90, 4)
	p, _ := h.Points(onlySeries(t, h).ID)
	// 0 is more than a minute before the newest point (90).
	if got := fmt.Sprint(pointValues(p)); got != "[3 4]" {
		t.Fatalf("points %s, want [3 4]", got)
	}
	if p.WindowSeconds != 60 {
		t.Fatalf("window %v", p.WindowSeconds)
	}
}

func TestHistoryBoundsSeries(t *testing.T) {
	h := NewHistory(10, time.Minute, 3)
	now := h0
	h.now = func() time.Time { return now }
	for i := range 5 {
		h.add(sample("m", map[string]string{"i": fmt.Sprint(i)}, "s", 0, 1))
	}
	if l := h.Series("", 0); l.Total != 3 || l.Dropped != 2 || l.Limit != 3 {
		t.Fatalf("total %d dropped %d limit %d, want 3, 2, 3", l.Total, l.Dropped, l.Limit)
	}
	// Series 0 and 1 keep publishing; 2 falls silent. Past the window a
	// new series takes its place.
	h.add(sample("m", map[string]string{"i": "0"}, "s", 100, 1))
	h.add(sample("m", map[string]string{"i": "1"}, "s", 100, 1))
	now = h0.Add(30 * time.Second)
	h.add(sample("m", map[string]string{"i": "new"}, "s", 100, 1))
	if l := h.Series("new", 0); l.Matched != 0 {
		t.Fatal("a series was replaced within the window")
	}
	now = h0.Add(2 * time.Minute)
	h.add(sample("m", map[string]string{"i": "new"}, "s", 120, 1))
	if l := h.Series("i=new", 0); l.Matched != 1 {
		t.Fatal("the new series did not replace the silent one")
	}
	if l := h.Series("i=2", 0); l.Matched != 0 || l.Total != 3 {
		t.Fatalf("the silent series is still there (matched %d, total %d)", l.Matched, l.Total)
	}
}

func TestHistorySeriesMatchAndOrder(t *testing.T) {
	h := NewHistory(10, time.Hour, 100)
	h.add(sample("myapp_queue_depth", map[string]string{"queue": "emails"}, "web-1", 0, 3))
	h.add(sample("myapp_queue_depth", map[string]string{"queue": "billing"}, "web-1", 0, 5))
	h.add(sample("go_goroutines", nil, "h:millrace-up", 0, 40))
	l := h.Series("", 0)
	var got []string
	for _, s := range l.Series {
		got = append(got, s.Name+LabelText(s.Labels))
	}
	if want := `[go_goroutines myapp_queue_depth{queue="billing"} myapp_queue_depth{queue="emails"}]`; fmt.Sprint(got) != want {
		t.Fatalf("series %v, want %s", got, want)
	}
	for match, want := range map[string]int{"QUEUE_DEPTH": 2, "queue=emails": 1, "billing": 1, "millrace-up": 1, "nothing": 0} {
		if n := h.Series(match, 0).Matched; n != want {
			t.Errorf("match %q: %d series, want %d", match, n, want)
		}
	}
	if l := h.Series("myapp", 1); len(l.Series) != 1 || l.Matched != 2 {
		t.Fatalf("limit 1: %d series of %d", len(l.Series), l.Matched)
	}
	// The list is a copy: changing it changes nothing kept.
	l.Series[0].Labels["queue"] = "changed"
	if h.Series("changed", 0).Matched != 0 {
		t.Fatal("the list shares its labels with the history")
	}
}

func TestDecodeOpsReadsSamplesAndBatches(t *testing.T) {
	single := sampleJSON("myapp_queue_depth", "gauge", 7, `{"queue":"a"}`, h0, "web-1")
	batch := []byte(`{"source":"h:tail","component":"tail","ts":"2026-05-01T12:00:00Z","samples":[` +
		`{"name":"millrace_tail_lines_read_total","kind":"counter","value":5,"labels":{"input":"app"}},` +
		`{"name":"go_gc_duration_seconds","kind":"summary","value":"NaN","labels":{"quantile":"0.5"}}]}`)
	got, ok := decodeOps(single)
	if !ok || len(got) != 1 || got[0].Value != 7 || got[0].Source != "web-1" || got[0].Labels["queue"] != "a" {
		t.Fatalf("single sample: %v %+v", ok, got)
	}
	got, ok = decodeOps(batch)
	if !ok || len(got) != 2 || got[0].Source != "h:tail" || !got[0].TS.Equal(h0) || got[0].Value != 5 || !math.IsNaN(got[1].Value) {
		t.Fatalf("batch: %v %+v", ok, got)
	}
	for _, bad := range []string{`not json`, `{"name":"x"}`, `{"ts":"2026-05-01T12:00:00Z"}`, `{"name":"x","ts":"2026-05-01T12:00:00Z","value":"many"}`} {
		if _, ok := decodeOps([]byte(bad)); ok {
			t.Errorf("%s decoded", bad)
		}
	}
}

type metricsSource struct {
	fixedSource
	*History
}

func (m metricsSource) MetricSeries(match string, limit int) SeriesList {
	return m.Series(match, limit)
}
func (m metricsSource) MetricPoints(id string) (SeriesPoints, bool) { return m.Points(id) }

func TestHandlerServesMetricHistory(t *testing.T) {
	h := NewHistory(10, time.Hour, 100)
	for i, v := range []float64{3, 8, math.NaN(), 5} {
		h.add(sample("myapp_queue_depth", map[string]string{"queue": `<img src=x onerror=alert(1)>`}, "web-1", i*10, v))
	}
	h.add(sample("other", nil, "web-1", 0, 1))
	srv := httptest.NewServer(Handler(metricsSource{fixedSource(testSnapshot()), h}, nil))
	defer srv.Close()
	get := func(path string, want int) []byte {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want {
			t.Fatalf("%s: status %d, want %d: %s", path, resp.StatusCode, want, body)
		}
		return body
	}
	var list SeriesList
	if err := json.Unmarshal(get("/console/api/metrics?match=queue", 200), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Series) != 1 || list.Total != 2 || list.Series[0].Last.V != 5 {
		t.Fatalf("list %+v", list)
	}
	var points SeriesPoints
	body := get("/console/api/metrics/points?id="+list.Series[0].ID, 200)
	if err := json.Unmarshal(body, &points); err != nil {
		t.Fatal(err)
	}
	if len(points.Points) != 4 || points.Points[0].V != 3 || !math.IsNaN(points.Points[2].V) || points.Points[3].V != 5 ||
		points.Labels["queue"] != `<img src=x onerror=alert(1)>` || points.Name != "myapp_queue_depth" {
		t.Fatalf("points %s", body)
	}
	if !strings.Contains(string(body), `,null]`) {
		t.Fatalf("NaN is not null in %s", body)
	}
	if got := get("/console/api/metrics?limit=1", 200); !strings.Contains(string(got), `"matched":2`) {
		t.Fatalf("limit: %s", got)
	}
	get("/console/api/metrics/points?id=nope", 404)
	get("/console/api/metrics?limit=-1", 400)

	// A source without a history answers an empty list.
	plain := httptest.NewServer(Handler(fixedSource(testSnapshot()), nil))
	defer plain.Close()
	resp, err := http.Get(plain.URL + "/console/api/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `"series":[]`) {
		t.Fatalf("without a history: %s", b)
	}
}
