package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
)

const retryPage = `<!doctype html>
<html><head><title>Retry shop</title>
<script src="%s/beacon.js" data-flush-interval="0" data-auto-pageview="false"></script></head>
<body><button id="buy" data-track>Buy</button></body></html>`

// flakyLink stands between the page and the beacon. Every POST of events
// reaches the beacon, but the first answer the browser gets is a 503 (as
// when the beacon's ack timeout expires after the broker took the events)
// and the second connection is cut before any answer; from the third on,
// answers pass. Both failures come after the events landed, which is the
// case a retry without stable ids would turn into a duplicate.
type flakyLink struct {
	beacon string
	proxy  *httputil.ReverseProxy

	mu     sync.Mutex // guards bodies
	bodies [][]byte   // every POST body, in order
}

func (l *flakyLink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/events" {
		l.proxy.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	l.mu.Lock()
	l.bodies = append(l.bodies, body)
	attempt := len(l.bodies)
	l.mu.Unlock()
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, l.beacon+"/v1/events", bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	req.Header = r.Header.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	switch attempt {
	case 1:
		// Readable by the page, so that this is an answer, not a network error.
		w.Header().Set("Access-Control-Allow-Origin", r.Header.Get("Origin"))
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	case 2:
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
		return
	}
	maps.Copy(w.Header(), resp.Header)
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(answer) // a failed write shows as a missing 2xx below
}

func (l *flakyLink) posts() [][]byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([][]byte(nil), l.bodies...)
}

// TestBrowserRetrySameIDs: a real Chromium tracks clicks with beacon.js,
// whose flush is delivered but answered with a 503, then delivered again
// over a connection cut before the answer. beacon.js retries both with the
// same event ids until an answer arrives, so the topic holds every event
// three times under one id, the copies identical but for received_at, and
// the browser's queue ends empty.
func TestBrowserRetrySameIDs(t *testing.T) {
	t.Parallel()
	const clicks = 10
	b := startBroker(t)
	b.createTopic(t, "clicks", 1, nil)
	var linkURL string
	pages := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, retryPage, linkURL)
	}))
	t.Cleanup(pages.Close)
	bc := startBeacon(t, b, "beacon:\n  topic: clicks\n  allowed_origins: [\""+pages.URL+"\"]\n")
	target, err := url.Parse(bc.url)
	if err != nil {
		t.Fatal(err)
	}
	link := &flakyLink{beacon: bc.url, proxy: httputil.NewSingleHostReverseProxy(target)}
	proxy := httptest.NewServer(link)
	t.Cleanup(proxy.Close)
	linkURL = proxy.URL

	ctx := newBrowser(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(pages.URL+"/")); err != nil {
		t.Fatalf("loading the page: %v", err)
	}
	step, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var actions []chromedp.Action[chromedp.Void]
	for range clicks {
		actions = append(actions, chromedp.Click(chromedp.ID("buy")))
	}
	if err := chromedp.Do(step, actions...); err != nil {
		t.Fatalf("clicking: %v", err)
	}
	if _, err := chromedp.Run(step, chromedp.Evaluate[bool](`millrace.flush(), true`)); err != nil {
		t.Fatal(err)
	}
	// The queue empties once an answer arrives, after two backoffs.
	if _, err := chromedp.Run(step, chromedp.Poll[bool](`localStorage.getItem('millrace:queue') === '[]'`,
		chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		t.Fatalf("the queue did not empty: %v", err)
	}

	posts := link.posts()
	if len(posts) != 3 {
		t.Fatalf("%d POSTs, want 3 (the 503, the cut connection, the answered retry)", len(posts))
	}
	for i, p := range posts[1:] {
		if !bytes.Equal(p, posts[0]) {
			t.Errorf("retry %d sent\n%s\nthe first attempt sent\n%s", i+1, p, posts[0])
		}
	}
	copies := make(map[string][]map[string]any)
	for _, v := range consumeAll(t, b, "clicks", 3*clicks, 30*time.Second) {
		var ev map[string]any
		if err := json.Unmarshal(v, &ev); err != nil {
			t.Fatalf("not JSON: %s", v)
		}
		id, _ := ev["event_id"].(string)
		copies[id] = append(copies[id], ev)
	}
	if len(copies) != clicks {
		t.Fatalf("%d distinct event ids, want %d: %v", len(copies), clicks, copies)
	}
	for id, evs := range copies {
		if u, err := uuid.Parse(id); err != nil || u.Version() != 7 || u.String() != id {
			t.Errorf("event_id %q is not a canonical UUIDv7 made by beacon.js", id)
		}
		if len(evs) != 3 {
			t.Errorf("event %s landed %d times, want 3 (every attempt was delivered)", id, len(evs))
			continue
		}
		first := maps.Clone(evs[0])
		delete(first, "received_at")
		for _, again := range evs[1:] {
			again = maps.Clone(again)
			delete(again, "received_at")
			if !reflect.DeepEqual(first, again) {
				t.Errorf("a retried copy differs from the first:\n%v\n%v", evs[0], again)
			}
		}
		if first["type"] != "click" || first["url"] != pages.URL+"/" {
			t.Errorf("event fields %v", first)
		}
	}

	// The sink drops the repeats: the lake holds each id once.
	root := t.TempDir()
	sink := startSink(t, b, "sink", "lake", "clicks", "file://"+root)
	waitLanded(t, b, "lake", "clicks", time.Minute, sink)
	rows, err := openDuck(t).Query(fmt.Sprintf(
		"SELECT CAST(event_id AS VARCHAR) FROM read_parquet('%s/clicks/**/*.parquet', hive_partitioning=true)", root))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	inLake := make(map[string]int)
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		inLake[id]++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for id := range copies {
		if inLake[id] != 1 {
			t.Errorf("event %s is in the lake %d times, want once", id, inLake[id])
		}
	}
	if len(inLake) != clicks {
		t.Errorf("the lake holds %d distinct ids, want the %d clicks: %v", len(inLake), clicks, inLake)
	}
}
