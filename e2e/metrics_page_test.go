package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"millrace/pipeline/appliance"
)

// A metric posted to the beacon's /v1/metrics with a changing value appears
// on the console's metrics tab under `millrace up`: found by name, chosen,
// and charted with its last value. Its label holds markup, which the page
// shows as text. A screenshot is kept as a test artifact.
func TestConsoleMetricsPageInChromium(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfgPath, _, webAddr := writeDemoConfig(t, dir, func(cfg *appliance.Config) {
		cfg.Demo.WriteLog, cfg.Tail, cfg.Sinks = "", nil, nil
	})
	up := startProcess(t, "up", "up", "--config", cfgPath)
	web := "http://" + webAddr
	waitHTTP(t, up, web+"/healthz")

	const label = `<img src=x onerror=window.pwned=1>`
	values := []float64{3, 8, 5, 11, 9, 14, 12, 17}
	start := time.Now().Add(-time.Duration(len(values)) * 5 * time.Second)
	for i, v := range values {
		body := fmt.Sprintf(`{"name":"myapp_queue_depth","kind":"gauge","value":%g,"labels":{"queue":"emails","note":%q},"ts":%q}`,
			v, label, start.Add(time.Duration(i)*5*time.Second).UTC().Format(time.RFC3339Nano))
		if a := request(t, "POST", web+"/v1/metrics?source=shop-web-1", "application/json", body, nil); a.status != http.StatusOK {
			t.Fatalf("POST /v1/metrics: %d %v", a.status, a.body)
		}
	}

	browser := newBrowser(t)
	if err := chromedp.Do(browser, chromedp.EmulateViewport(1280, 720), chromedp.Navigate(web+"/console#metrics")); err != nil {
		t.Fatalf("loading the console: %v", err)
	}
	step, cancel := context.WithTimeout(browser, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(step, chromedp.WaitVisible(`#metric-match`), chromedp.SendKeys(`#metric-match`, "queue_depth")); err != nil {
		t.Fatalf("typing the filter: %v", err)
	}
	// The page polls the series list: wait for the series in the
	// filtered list, then choose it as a user would.
	option, err := chromedp.Run(step, chromedp.Poll[string](`(() => {
		const all = document.querySelectorAll("#metric-series option");
		if (all.length !== 1 || !all[0].textContent.startsWith("myapp_queue_depth")) return "";
		const sel = document.getElementById("metric-series");
		sel.value = all[0].value;
		sel.dispatchEvent(new Event("change"));
		return all[0].textContent;
	})()`, chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(45*time.Second)))
	if err != nil {
		t.Fatalf("the metric never appeared alone in the filtered list: %v", err)
	}
	if !strings.Contains(option, label) || !strings.Contains(option, "shop-web-1") {
		t.Fatalf("option text %q, want the labels as text and the source", option)
	}
	if _, err := chromedp.Run(step, chromedp.Poll[bool](`(document.getElementById("metric-last-value") || {}).textContent === "17"`,
		chromedp.WithPollingMutation(), chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		last, _ := chromedp.Run(step, chromedp.Evaluate[string](`document.getElementById("metric-last").textContent`))
		t.Fatalf("the chart never showed the last value 17 (it shows %q): %v", last, err)
	}
	d, err := chromedp.Run(step, chromedp.Evaluate[string](`document.querySelector("#chart-metric path.metric-line").getAttribute("d")`))
	if err != nil {
		t.Fatalf("no chart line: %v", err)
	}
	if n := strings.Count(d, "M") + strings.Count(d, "L"); n != len(values) {
		t.Fatalf("the line has %d points, want %d: %s", n, len(values), d)
	}
	pwned, err := chromedp.Run(step, chromedp.Evaluate[bool](`window.pwned === 1 || document.querySelector("#metrics-page img") !== null`))
	if err != nil || pwned {
		t.Fatalf("a label's markup ran or was inserted as HTML (%v)", err)
	}
	title, err := chromedp.Run(step, chromedp.Evaluate[string](`document.getElementById("metric-title").textContent + " " + document.getElementById("metric-labels").textContent`))
	if err != nil || !strings.Contains(title, "myapp_queue_depth") || !strings.Contains(title, `queue="emails"`) {
		t.Fatalf("chart title %q (%v)", title, err)
	}

	png, err := chromedp.Run(step, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	out := os.Getenv("MILLRACE_ARTIFACTS")
	if out == "" {
		out = t.TempDir()
	} else if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(out, "console-metrics.png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("metrics page screenshot: %s (%d bytes)", path, len(png))
}
