package appliance

import (
	"context"
	_ "embed"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"millrace/agents/intake"
)

//go:embed demo.html
var demoPage []byte

// serveDemoPage is the page a new user clicks around on: it loads the
// tracker, so every click becomes an event, then a Parquet row.
func (a *Appliance) serveDemoPage(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write(demoPage)
}

// writeDemoLog appends a service-like log line to path every interval (and
// the odd multi-line stack trace), so the demo's tail input has something to
// ship.
func writeDemoLog(ctx context.Context, path string, interval time.Duration, logger *slog.Logger) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		logger.Error("demo log", "err", err)
		return
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		logger.Error("demo log", "err", err)
		return
	}
	defer f.Close()
	t := time.NewTicker(interval)
	defer t.Stop()
	paths := []string{"/", "/products", "/cart", "/checkout", "/search?q=boots"}
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			line := fmt.Sprintf("%s INFO request id=%d method=GET path=%s status=200 duration_ms=%d\n",
				now.UTC().Format(time.RFC3339Nano), n, paths[rand.IntN(len(paths))], 5+rand.IntN(120))
			if n%20 == 0 {
				line += fmt.Sprintf("%s ERROR payment failed id=%d\njava.lang.IllegalStateException: card declined\n\tat shop.Payments.charge(Payments.java:42)\n\tat shop.Checkout.run(Checkout.java:17)\n",
					now.UTC().Format(time.RFC3339Nano), n)
			}
			if _, err := f.WriteString(line); err != nil {
				logger.Error("demo log", "err", err)
				return
			}
		}
	}
}

// publishOpsMetrics publishes the appliance's metrics to the ops topic.
func (a *Appliance) publishOpsMetrics(ctx context.Context) {
	host, _ := os.Hostname()
	p := &intake.Publisher{
		Gatherer: a.registry,
		Producer: a.shipper,
		Topic:    a.cfg.OpsMetrics.Topic,
		Source:   host + ":millrace-up",
		Interval: a.cfg.OpsMetrics.Interval,
		Logger:   a.logger.With("component", "ops-metrics"),
	}
	p.Run(ctx)
}
