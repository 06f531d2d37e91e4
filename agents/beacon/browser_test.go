package beacon

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"millrace/agents/ship"
	"millrace/internal/waitfor"
)

// chromiumPath finds the browser. ENVIRONMENT.md: Debian's chromium
// (`apt-get install -y chromium`); `make deps` installs it.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no Chromium found: install it with `apt-get install -y chromium` (make deps)")
	return ""
}

// newBrowser starts headless Chromium with the flags this machine needs (no
// sandbox as root, no background networking on a closed network); the test's
// cleanup stops it.
func newBrowser(t *testing.T, chromium string) context.Context {
	t.Helper()
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(chromium),
			chromedp.Headless,
			chromedp.NoSandbox,
			chromedp.DisableGPU,
			chromedp.Flag("disable-background-networking", true),
			chromedp.Flag("disable-dev-shm-usage", true),
		)...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	return ctx
}

const shopPage = `<!doctype html>
<html><head><title>Shop home</title>
<script src="%s/beacon.js" data-flush-interval="0"></script>
</head><body>
<button id="buy" data-track data-product-id="p-42" data-price="9.99">Buy now</button>
<a id="next" href="/next">Next page</a>
</body></html>`

const nextPage = `<!doctype html><html><head><title>Next</title></head><body><p id="done">done</p></body></html>`

// TestBrowserTracker loads a page that includes /beacon.js in headless
// Chromium, clicks a data-track element and a link, and checks that the page
// view (sent on load), and both clicks (queued, then flushed with sendBeacon
// when the link's navigation hides the page) arrive in the topic with the
// expected fields.
func TestBrowserTracker(t *testing.T) {
	chromium := chromiumPath(t)
	// The page is on another origin than the beacon, as on a real site: the
	// beacon's allow-list names the page's origin.
	var beaconURL string
	pages := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		switch r.URL.Path {
		case "/":
			fmt.Fprintf(w, shopPage, beaconURL)
		case "/next":
			fmt.Fprint(w, nextPage)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(pages.Close)
	h := newHarness(t, Config{AllowedOrigins: []string{pages.URL}}, ship.Config{})
	var mu sync.Mutex // guards posts
	var posts []string
	beacon := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			mu.Lock()
			posts = append(posts, r.Header.Get("Content-Type")+" from "+r.Header.Get("Origin"))
			mu.Unlock()
		}
		h.server.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(beacon.Close)
	beaconURL = beacon.URL

	ctx := newBrowser(t, chromium)
	// The first Run starts the browser: no timeout on it (see chromedp.Run).
	if err := chromedp.Do(ctx, chromedp.Navigate(pages.URL+"/")); err != nil {
		t.Fatalf("loading the page: %v", err)
	}
	// The page view is sent on load.
	waitfor.Until(t, 15*time.Second, "the first event in the topic", func() bool { return h.endOffset(topic) >= 1 })
	if evs := h.events(topic); len(evs) != 1 || evs[0]["type"] != "page_view" {
		t.Fatalf("after load: %v, want one page view (clicks wait in the queue)", evs)
	}
	stepCtx, cancelStep := context.WithTimeout(ctx, 30*time.Second)
	defer cancelStep()
	if err := chromedp.Do(stepCtx,
		chromedp.Click(chromedp.ID("buy")),
		chromedp.Click(chromedp.ID("next")),
		chromedp.WaitVisible(chromedp.ID("done")),
	); err != nil {
		t.Fatalf("clicking: %v", err)
	}
	waitfor.Until(t, 15*time.Second, "three events in the topic", func() bool { return h.endOffset(topic) >= 3 })
	evs := h.events(topic)
	if len(evs) != 3 {
		t.Fatalf("%d events, want 3: %v", len(evs), evs)
	}
	var pv, buy, link map[string]any
	for _, e := range evs {
		props, _ := e["properties"].(map[string]any)
		switch {
		case e["type"] == "page_view":
			pv = e
		case e["type"] == "click" && props["id"] == "buy":
			buy = e
		case e["type"] == "click" && props["id"] == "next":
			link = e
		}
	}
	if pv == nil || buy == nil || link == nil {
		t.Fatalf("want a page view and two clicks, got %v", evs)
	}
	for _, e := range []map[string]any{pv, buy, link} {
		id, _ := e["event_id"].(string)
		if u, err := uuid.Parse(id); err != nil || u.Version() != 7 {
			t.Errorf("event_id %q is not a UUIDv7", id)
		}
		if e["url"] != pages.URL+"/" || e["title"] != "Shop home" || e["referrer"] != "" {
			t.Errorf("page fields of %v", e)
		}
		if e["anonymous_id"] != pv["anonymous_id"] || e["anonymous_id"] == nil || e["anonymous_id"] == "" {
			t.Errorf("anonymous_id %v, want the page view's %v", e["anonymous_id"], pv["anonymous_id"])
		}
		if e["session_id"] != pv["session_id"] || e["session_id"] == nil {
			t.Errorf("session_id %v, want the page view's %v", e["session_id"], pv["session_id"])
		}
		if ua, _ := e["user_agent"].(string); !strings.Contains(ua, "Chrome") {
			t.Errorf("user_agent %q", ua)
		}
		if e["ip"] != "127.0.0.1" {
			t.Errorf("ip %v", e["ip"])
		}
		ts, err := time.Parse(time.RFC3339Nano, fmt.Sprint(e["ts"]))
		if err != nil || time.Since(ts) > time.Minute {
			t.Errorf("ts %v: want the client's recent time, normalised", e["ts"])
		}
	}
	bp := buy["properties"].(map[string]any)
	if bp["productId"] != "p-42" || bp["price"] != "9.99" || bp["tag"] != "button" || bp["text"] != "Buy now" {
		t.Errorf("data-track click properties %v", bp)
	}
	lp := link["properties"].(map[string]any)
	if lp["href"] != pages.URL+"/next" || lp["text"] != "Next page" || lp["tag"] != "a" {
		t.Errorf("link click properties %v", lp)
	}
	// The clicks went out with sendBeacon at pagehide, which gives no
	// answer, so they stayed queued: the next page load sends them again
	// with the same ids, with its page view.
	if err := chromedp.Do(stepCtx, chromedp.Navigate(pages.URL+"/")); err != nil {
		t.Fatal(err)
	}
	waitfor.Until(t, 15*time.Second, "six events in the topic", func() bool { return h.endOffset(topic) >= 6 })
	// Opt-out: once millrace.optOut() ran, nothing is sent, across page
	// loads (it is kept in localStorage), until millrace.optIn().
	if _, err := chromedp.Run(stepCtx, chromedp.Evaluate[bool](`millrace.optOut(), true`)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(stepCtx,
		chromedp.Click(chromedp.ID("buy")),
		chromedp.Click(chromedp.ID("next")),
		chromedp.WaitVisible(chromedp.ID("done")),
		chromedp.Navigate(pages.URL+"/"),
	); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(stepCtx, chromedp.Evaluate[bool](`millrace.optIn(), millrace.track('marker'), millrace.flush(), true`)); err != nil {
		t.Fatal(err)
	}
	waitfor.Until(t, 15*time.Second, "the marker event in the topic", func() bool { _, ok := byType(h.events(topic))["marker"]; return ok })
	evs = h.events(topic)
	// Two page views, the two clicks twice each and the marker.
	if len(evs) != 7 {
		t.Fatalf("%d events, want 7: the opted-out clicks and page view must not be sent: %v", len(evs), evs)
	}
	copies := make(map[any][]map[string]any)
	for _, e := range evs {
		copies[e["event_id"]] = append(copies[e["event_id"]], e)
	}
	if len(copies) != 5 || len(copies[buy["event_id"]]) != 2 || len(copies[link["event_id"]]) != 2 {
		t.Fatalf("%d distinct ids, want 5, with the two clicks sent twice: %v", len(copies), evs)
	}
	for _, c := range [][]map[string]any{copies[buy["event_id"]], copies[link["event_id"]]} {
		first, again := maps.Clone(c[0]), maps.Clone(c[1])
		delete(first, "received_at")
		delete(again, "received_at")
		if !reflect.DeepEqual(first, again) {
			t.Errorf("a resent event differs from its first copy:\n%v\n%v", c[0], c[1])
		}
	}
	for _, e := range evs {
		if e["anonymous_id"] != pv["anonymous_id"] {
			t.Errorf("anonymous_id %v changed across page loads (want %v from localStorage)", e["anonymous_id"], pv["anonymous_id"])
		}
	}
	mu.Lock()
	defer mu.Unlock()
	// Four POSTs: the page view at load, the flush at pagehide, the second
	// page view with the clicks again, and the marker; all text/plain (a
	// CORS "simple request", without preflight) from the page's origin.
	if len(posts) != 4 {
		t.Fatalf("POSTs %v, want 4", posts)
	}
	for _, p := range posts {
		if p != "text/plain;charset=UTF-8 from "+pages.URL {
			t.Errorf("POST %q, want text/plain from the page origin", p)
		}
	}
}

const queuePage = `<!doctype html>
<html><head><title>Queue</title>
<script src="%s/beacon.js" data-flush-interval="0" data-auto-pageview="false"></script>
</head><body></body></html>`

// TestBrowserQueue: while the beacon answers 503, beacon.js keeps at most
// 500 events in localStorage, dropping the oldest and counting them; a page
// load keeps the queue and its ids; once the beacon answers, a 413 halves
// the request until it fits, every queued event lands once under the id it
// was made with, and the count of dropped events follows as an event.
func TestBrowserQueue(t *testing.T) {
	chromium := chromiumPath(t)
	const tracked, bound = 503, 500
	var beaconURL string
	pages := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, queuePage, beaconURL)
	}))
	t.Cleanup(pages.Close)
	h := newHarness(t, Config{AllowedOrigins: []string{pages.URL}, MaxEventsPerRequest: 5}, ship.Config{})
	var down atomic.Bool
	var refused atomic.Int64 // 503s answered while down
	var tooLarge atomic.Int64
	beacon := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && down.Load() {
			refused.Add(1)
			w.Header().Set("Access-Control-Allow-Origin", r.Header.Get("Origin"))
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		h.server.Handler().ServeHTTP(rec, r)
		if rec.code == http.StatusRequestEntityTooLarge {
			tooLarge.Add(1)
		}
	}))
	t.Cleanup(beacon.Close)
	beaconURL = beacon.URL

	ctx := newBrowser(t, chromium)
	down.Store(true)
	if err := chromedp.Do(ctx, chromedp.Navigate(pages.URL+"/")); err != nil {
		t.Fatalf("loading the page: %v", err)
	}
	step, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	queued := func() []string {
		t.Helper()
		ids, err := chromedp.Run(step, chromedp.Evaluate[[]string](
			`JSON.parse(localStorage.getItem('millrace:queue') || '[]').map(function (e) { return e.event_id; })`))
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	first, err := chromedp.Run(step, chromedp.Evaluate[string](fmt.Sprintf(
		`for (var i = 0; i < %d; i++) { millrace.track('e', {n: i}); }
		 JSON.parse(localStorage.getItem('millrace:queue'))[0].properties.n + '/' + localStorage.getItem('millrace:dropped')`, tracked)))
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%d/%d", tracked-bound, tracked-bound); first != want {
		t.Fatalf("oldest queued event n / dropped count = %s, want %s", first, want)
	}
	before := queued()
	if len(before) != bound {
		t.Fatalf("%d events queued, want the bound %d", len(before), bound)
	}
	// The 20th event started a flush; the 503 backs it off, so the
	// remaining events did not each send one.
	waitfor.Until(t, 15*time.Second, "a refused request", func() bool { return refused.Load() >= 1 })
	if n := refused.Load(); n > 2 {
		t.Errorf("%d requests while the beacon answered 503, want the flush and at most one retry", n)
	}
	sofar := refused.Load()
	if err := chromedp.Do(step, chromedp.Navigate(pages.URL+"/")); err != nil {
		t.Fatal(err)
	}
	waitfor.Until(t, 15*time.Second, "the new page's refused flush", func() bool { return refused.Load() > sofar }) // the new page's flush
	if after := queued(); !slices.Equal(after, before) {
		t.Fatalf("a page load changed the queue: %d ids before, %d after", len(before), len(after))
	}

	down.Store(false)
	if _, err := chromedp.Run(step, chromedp.Poll[bool](`localStorage.getItem('millrace:queue') === '[]'`,
		chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		t.Fatalf("the queue did not empty: %v", err)
	}
	if tooLarge.Load() == 0 {
		t.Errorf("no 413: the test did not exercise the halving")
	}
	evs := h.events(topic)
	if len(evs) != bound+1 {
		t.Fatalf("%d events, want the %d queued and the overflow report", len(evs), bound)
	}
	landed := make(map[string]bool)
	for _, e := range evs {
		id, _ := e["event_id"].(string)
		if landed[id] {
			t.Errorf("event %s landed twice", id)
		}
		landed[id] = true
		if e["type"] == "millrace_queue_overflow" {
			if props, _ := e["properties"].(map[string]any); props["dropped"] != float64(tracked-bound) {
				t.Errorf("overflow report %v, want dropped %d", props, tracked-bound)
			}
		}
	}
	for _, id := range before {
		if !landed[id] {
			t.Errorf("queued event %s did not land under its id", id)
		}
	}
}
