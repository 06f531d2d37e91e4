package beacon

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"millrace/agents/ship"
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

	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(chromium),
			chromedp.Headless,
			chromedp.NoSandbox,
			chromedp.DisableGPU,
			chromedp.Flag("disable-background-networking", true),
			chromedp.Flag("disable-dev-shm-usage", true),
		)...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(allocCtx)
	defer cancel()
	// The first Run starts the browser: no timeout on it (see chromedp.Run).
	if err := chromedp.Do(ctx, chromedp.Navigate(pages.URL+"/")); err != nil {
		t.Fatalf("loading the page: %v", err)
	}
	// The page view is sent on load.
	waitFor(t, func() bool { return h.endOffset(topic) >= 1 })
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
	waitFor(t, func() bool { return h.endOffset(topic) >= 3 })
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
	waitFor(t, func() bool { return h.endOffset(topic) >= 6 })
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
	waitFor(t, func() bool { _, ok := byType(h.events(topic))["marker"]; return ok })
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
