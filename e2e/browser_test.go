package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// newBrowser starts headless Debian Chromium with the flags this machine
// needs (no sandbox as root, no background networking on a closed network).
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium is not installed: run `make deps` (Debian package chromium)")
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(path),
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

const trackedPage = `<!doctype html>
<html><head><title>E2E shop</title><script src="%s/beacon.js"></script></head>
<body><button id="buy" data-track data-sku="sku-7">Buy</button><a id="next" href="/next">Next</a></body></html>`

// A real Chromium loads a page with /beacon.js from a real beacon process;
// the page view, a data-track click and the link click flushed on pagehide
// reach the broker's topic with the tracker's and the server's fields.
func TestBrowserBeaconToBroker(t *testing.T) {
	b := startBroker(t)
	b.createTopic(t, "clicks", 1, nil)
	var beaconURL string
	pages := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if r.URL.Path == "/" {
			fmt.Fprintf(w, trackedPage, beaconURL)
			return
		}
		fmt.Fprint(w, `<!doctype html><html><body><p id="done">done</p></body></html>`)
	}))
	t.Cleanup(pages.Close)
	bc := startBeacon(t, b, "beacon:\n  topic: clicks\n  allowed_origins: [\""+pages.URL+"\"]\n")
	beaconURL = bc.url

	ctx := newBrowser(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(pages.URL+"/")); err != nil {
		t.Fatalf("loading the page: %v", err)
	}
	step, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(step,
		chromedp.Click(chromedp.ID("buy")),
		chromedp.Click(chromedp.ID("next")),
		chromedp.WaitVisible(chromedp.ID("done")),
	); err != nil {
		t.Fatalf("clicking: %v", err)
	}
	events := map[string]map[string]any{}
	for _, v := range consumeAll(t, b, "clicks", 3, 30*time.Second) {
		var ev map[string]any
		if err := json.Unmarshal(v, &ev); err != nil {
			t.Fatalf("not JSON: %s", v)
		}
		props, _ := ev["properties"].(map[string]any)
		events[fmt.Sprint(ev["type"], "/", props["id"])] = ev
	}
	pv, buy, next := events["page_view/<nil>"], events["click/buy"], events["click/next"]
	if pv == nil || buy == nil || next == nil {
		t.Fatalf("want a page view, the buy click and the link click; got %v", events)
	}
	if buy["properties"].(map[string]any)["sku"] != "sku-7" {
		t.Errorf("data-track properties: %v", buy["properties"])
	}
	for _, ev := range []map[string]any{pv, buy, next} {
		if ev["url"] != pages.URL+"/" || ev["title"] != "E2E shop" || ev["anonymous_id"] != pv["anonymous_id"] || ev["anonymous_id"] == nil {
			t.Errorf("page fields of %v", ev)
		}
		if ev["ip"] != "127.0.0.1" || ev["event_id"] == nil || ev["received_at"] == nil {
			t.Errorf("server fields of %v", ev)
		}
	}
}
