package appliance

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestDemoPageFitsTheWindow: Chromium shows the demo page at a phone's
// width and a laptop's without anything wider than the window, the DuckDB
// query included.
func TestDemoPageFitsTheWindow(t *testing.T) {
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium is not installed: run `make deps` (Debian package chromium)")
	}
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r) // /beacon.js: no beacon here
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write(demoPage)
	}))
	t.Cleanup(page.Close)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
			chromedp.Flag("disable-background-networking", true),
			chromedp.Flag("disable-dev-shm-usage", true),
		)...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(cancel)
	// The browser lives as long as the context of its first action.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatal(err)
	}
	for _, width := range []int64{360, 1280} {
		step, cancelStep := context.WithTimeout(ctx, 30*time.Second)
		// The widest element's right edge, and the command boxes' own
		// overflow (the lake commands', and the DuckDB query's).
		type measure struct {
			Page, Query float64
			Text        string
		}
		err := chromedp.Do(step,
			chromedp.EmulateViewport(width, 800),
			chromedp.Navigate(page.URL+"/"),
			chromedp.WaitVisible(chromedp.CSS("pre")),
		)
		var overflow measure
		if err == nil {
			overflow, err = chromedp.Run(step, chromedp.Evaluate[measure](`(() => {
				let right = 0, query = 0, text = "";
				for (const el of document.body.querySelectorAll("*")) right = Math.max(right, el.getBoundingClientRect().right);
				for (const pre of document.querySelectorAll("pre")) {
					query = Math.max(query, pre.scrollWidth - pre.clientWidth);
					text += pre.textContent + "\n";
				}
				return {Page: right - window.innerWidth, Query: query, Text: text};
			})()`))
		}
		cancelStep()
		if err != nil {
			t.Fatalf("%dpx: %v", width, err)
		}
		if overflow.Page > 0 || overflow.Query > 0 {
			t.Errorf("%dpx wide: the page runs %vpx past the window, a command box %vpx past its width", width, overflow.Page, overflow.Query)
		}
		if want := "bin/millrace lake inspect .millrace/lake --table clicks \\\n  --sql > clicks.sql"; !strings.Contains(overflow.Text, want) {
			t.Errorf("the page's commands %q lack %q", overflow.Text, want)
		}
	}
}
