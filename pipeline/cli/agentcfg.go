package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.yaml.in/yaml/v3"

	"millrace/internal/httpserver"
)

// loadYAML decodes a config file into v, rejecting unknown keys so a typo is
// an error, not a silently ignored setting.
func loadYAML(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) { // io.EOF: an empty file
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// newRegistry is a Prometheus registry with the Go and process collectors,
// as every millrace process exposes.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// serveMetrics serves /metrics on addr until ctx ends, and /readyz when
// ready is given (an agent's producer: 200 while records ship, 503 with the
// reason while they cannot); an empty addr serves nothing. It returns once
// the listener is bound, so a bad address fails the command at start.
func serveMetrics(ctx context.Context, addr string, reg *prometheus.Registry, logger *slog.Logger, ready ...func(context.Context) error) (wait func(), err error) {
	if addr == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics listener: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	if len(ready) > 0 {
		mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Header().Set("Cache-Control", "no-store")
			// Ready answers from what the producer already saw; it
			// waits only before the first contact with a broker.
			rctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
			defer cancel()
			if err := ready[0](rctx); err != nil {
				w.WriteHeader(http.StatusServiceUnavailable)
				fmt.Fprintf(w, "not ready: %v\n", err)
				return
			}
			io.WriteString(w, "ready\n")
		})
	}
	srv := httpserver.New(mux, httpserver.Timeouts{}, logger)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("metrics server failed", "err", err)
		}
	}()
	stop := context.AfterFunc(ctx, func() {
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(shutdownCtx)
	})
	logger.Info("serving metrics", "addr", ln.Addr().String())
	return func() {
		if stop() { // ctx never ended: stop the server now
			srv.Close()
		}
		<-done
	}, nil
}

// newLogger logs text lines to stderr at the level named by --log-level.
func newLogger(e env, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, usageError("--log-level: %v", err)
	}
	return slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: l})), nil
}
