package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/internal/httpserver"
	"millrace/internal/waitfor"
	"millrace/pipeline/appliance"
)

// promConfig is the prometheus.yml of TestPromWriteFromPrometheus: one
// target scraped every second, remote-written to millrace with the bearer
// token a user gives remote_write (authorization: credentials_file), with
// batches and metadata sent every second instead of Prometheus's 5 s and
// 1 min so the test is quick.
const promConfig = `global:
  scrape_interval: 1s
scrape_configs:
  - job_name: shop
    static_configs:
      - targets: [%q]
remote_write:
  - url: %q
    authorization:
      type: Bearer
      credentials_file: %q
    queue_config:
      batch_send_deadline: 1s
      max_samples_per_send: 500
      min_backoff: 100ms
    metadata_config:
      send_interval: 1s
`

// Debian's Prometheus scrapes a target and remote-writes to `millrace up`
// (http.auth on: Prometheus sends the token): the samples land in the
// metrics topic as /v1/metrics events, with the target's labels, job and
// instance, the kind from Prometheus's metadata and the source named in
// the url; `millrace top` shows them as it shows posted samples and lists
// remote write among the inputs, and the console's inputs table shows its
// rate and the one failed request the test sends.
func TestPromWriteFromPrometheus(t *testing.T) {
	t.Parallel()
	promBin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatal("prometheus is not installed: run `make deps` (Debian package prometheus)")
	}
	var scrapes atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n := scrapes.Add(1)
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprintf(w, "# HELP shop_orders_total Orders taken.\n# TYPE shop_orders_total counter\nshop_orders_total{store=\"berlin\"} %d\n", 3*n)
	}))
	t.Cleanup(target.Close)
	targetHost := strings.TrimPrefix(target.URL, "http://")

	dir := t.TempDir()
	token := "e2e-remote-write-token-0123456789"
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfgPath, kafkaAddr, webAddr := writeDemoConfig(t, dir, func(cfg *appliance.Config) {
		cfg.Demo.WriteLog, cfg.Tail, cfg.Sinks = "", nil, nil
		cfg.OpsMetrics.Interval = time.Second
		cfg.HTTP.Auth.AuthConfig = httpserver.AuthConfig{TokenFile: tokenFile}
	})
	up := startProcess(t, "up", "up", "--config", cfgPath)
	web := "http://" + webAddr
	waitHTTP(t, up, web+"/healthz")

	promYML := filepath.Join(dir, "prometheus.yml")
	writeURL := web + "/api/v1/write?source=prom-e2e"
	if err := os.WriteFile(promYML, fmt.Appendf(nil, promConfig, targetHost, writeURL, tokenFile), 0o644); err != nil {
		t.Fatal(err)
	}
	prom := startProcessOf(t, &process{t: t, name: "prometheus", bin: promBin, args: []string{
		"--config.file=" + promYML, "--storage.tsdb.path=" + filepath.Join(dir, "tsdb"),
		"--web.listen-address=127.0.0.1:" + strconv.Itoa(freePort(t)),
	}})

	// The samples land with their labels; the kind comes once
	// Prometheus's metadata has arrived.
	cl := kafkaClient(t, &broker{addr: kafkaAddr}, kgo.ConsumeTopics("ops.metrics"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var landed, up1 map[string]any
	defer reportLastSeen(t, func() string { return fmt.Sprintf("last order sample %v, last up sample %v", landed, up1) })()
	waitfor.Until(t, 90*time.Second, "a counter sample of shop_orders_total and an up sample from Prometheus in ops.metrics", func() bool {
		prom.exitedEarly("remote-writing")
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			var ev map[string]any
			if json.Unmarshal(r.Value, &ev) != nil || ev["source"] != "prom-e2e" {
				return
			}
			switch ev["name"] {
			case "shop_orders_total":
				if landed == nil || landed["kind"] != "counter" {
					landed = ev
				}
			case "up":
				up1 = ev
			}
		})
		return landed != nil && landed["kind"] == "counter" && up1 != nil
	})
	labels, _ := landed["labels"].(map[string]any)
	if labels["store"] != "berlin" || labels["job"] != "shop" || labels["instance"] != targetHost || len(labels) != 3 {
		t.Fatalf("labels %v, want store, job and instance", labels)
	}
	if v, _ := landed["value"].(float64); v <= 0 || int(v)%3 != 0 {
		t.Fatalf("value %v, want a multiple of 3 the target served", landed["value"])
	}
	if ts, err := time.Parse(time.RFC3339Nano, fmt.Sprint(landed["ts"])); err != nil || time.Since(ts) > 5*time.Minute {
		t.Fatalf("ts %v (%v), want the scrape's time", landed["ts"], err)
	}
	if upLabels, _ := up1["labels"].(map[string]any); up1["value"] != 1.0 || upLabels["job"] != "shop" || upLabels["instance"] != targetHost {
		t.Fatalf("up sample %v", up1)
	}

	// A request that is no remote write body: answered 400, counted as
	// the input's error.
	bad := request(t, "POST", web+"/api/v1/write", "application/x-protobuf", "no snappy here",
		map[string]string{"Content-Encoding": "snappy", "Authorization": "Bearer " + token})
	if bad.status != http.StatusBadRequest {
		t.Fatalf("a garbage body: %d %v, want 400", bad.status, bad.body)
	}
	if a := request(t, "POST", web+"/api/v1/write", "application/x-protobuf", "", map[string]string{"Content-Encoding": "snappy"}); a.status != http.StatusUnauthorized {
		t.Fatalf("remote write without the token: %d, want 401", a.status)
	}

	var out string
	defer reportLastSeen(t, func() string { return "the last millrace top --once:\n" + out })()
	waitfor.Until(t, 60*time.Second, "top to list remote write with samples and the failed request", func() bool {
		out = run(t, 60*time.Second, "", millraceBin, "top", "--once", "-b", kafkaAddr, "--interval", "500ms")
		// INPUT SOURCE RATE TOTAL ERRORS ERRORS-TOTAL: the name and the
		// rates are two words each.
		for _, row := range rowsAfter(out, "INPUT") {
			if len(row) == 9 && row[0] == "remote" && row[1] == "write" && row[5] != "0" && row[8] == "1" {
				return true
			}
		}
		return false
	})
	out = run(t, 60*time.Second, "", millraceBin, "top", "--once", "--metrics", "--match", "shop_orders_total", "-b", kafkaAddr, "--interval", "500ms")
	// METRIC LABELS SOURCE KIND VALUE AGE
	rows := rowsAfter(out, "METRIC")
	want := fmt.Sprintf(`{instance=%q,job="shop",store="berlin"}`, targetHost)
	if len(rows) != 1 || len(rows[0]) != 6 || rows[0][1] != want || rows[0][2] != "prom-e2e" || rows[0][3] != "counter" {
		t.Fatalf("top --metrics rows %q, want shop_orders_total %s from prom-e2e", rows, want)
	}

	browser := newBrowser(t)
	login := web + "/console?" + url.Values{"token": {token}}.Encode()
	if err := chromedp.Do(browser, chromedp.Navigate(login)); err != nil {
		t.Fatalf("loading the console: %v", err)
	}
	var row string
	defer reportLastSeen(t, func() string { return "the console's remote write row: " + row })()
	waitfor.Until(t, 60*time.Second, "the console's inputs table to show remote write taking samples, with one error", func() bool {
		step, cancel := context.WithTimeout(browser, 10*time.Second)
		defer cancel()
		cells, err := chromedp.Run(step, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('#inputs tr[data-input="remote write"] td'), td => td.textContent)`))
		if err != nil {
			t.Fatalf("reading the inputs table: %v", err)
		}
		row = strings.Join(cells, " | ")
		// Input, source, rate, total, errors/s, errors, last seen.
		return len(cells) == 7 && strings.HasSuffix(cells[2], " samples/s") && !strings.HasPrefix(cells[2], "0.0 ") &&
			cells[3] != "0" && strings.HasSuffix(cells[4], " requests/s") && cells[5] == "1"
	})
	t.Logf("console: %s", row)
}
