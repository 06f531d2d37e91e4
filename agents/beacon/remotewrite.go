package beacon

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"millrace/agents/promwrite"
)

// The beacon also serves Prometheus remote write 1.0 at POST /api/v1/write
// (package promwrite), on by default: the samples of a Prometheus server,
// Grafana Alloy or vmagent land in MetricsTopic as the same metric-sample
// events /v1/metrics makes, and the same audit counter counts them. The
// route skips the ingest routes' CORS, per-client rate limit and
// per-client slots: a remote write sender is a server, and Prometheus
// drops a batch answered 429 (unless queue_config.retry_on_http_429),
// whereas it retries the 503 the handler answers when its
// remote_write.max_in_flight requests are in progress.

// RemoteWriteConfig is the remote write route of the beacon.
type RemoteWriteConfig struct {
	// Enabled serves POST /api/v1/write. Default true.
	Enabled *bool `yaml:"enabled"`
	// Inline: topic, source, max_body_bytes, max_samples, ack_timeout and
	// the rest of promwrite.Config. Topic defaults to the beacon's
	// metrics_topic, source to its metrics_source, ack_timeout to its
	// ack_timeout.
	promwrite.Config `yaml:",inline"`
}

// On reports whether the route is served.
func (c RemoteWriteConfig) On() bool { return c.Enabled == nil || *c.Enabled }

// remoteWriteDefaults fills the remote write settings the beacon's own
// settings give: the metrics topic and source, and the acknowledgement
// timeout the server's write timeout is made for.
func (c Config) remoteWriteDefaults() RemoteWriteConfig {
	rw := c.RemoteWrite
	if rw.Topic == "" {
		rw.Topic = c.MetricsTopic
	}
	if rw.Source == "" {
		rw.Source = c.MetricsSource
	}
	if rw.AckTimeout == 0 {
		rw.AckTimeout = c.AckTimeout
	}
	rw.Config = rw.Config.WithDefaults()
	return rw
}

// validateRemoteWrite checks the remote write settings (after defaults).
func (c Config) validateRemoteWrite() error {
	if !c.RemoteWrite.On() {
		return nil
	}
	var errs []error
	if err := c.RemoteWrite.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("beacon: remote_write: %w", err))
	}
	if c.RemoteWrite.Topic == c.MetricsDLQTopic || c.RemoteWrite.Topic == c.DLQTopic {
		errs = append(errs, fmt.Errorf("beacon: remote_write: topic %q is a dead-letter topic; samples would mix with rejected events", c.RemoteWrite.Topic))
	}
	if c.WriteTimeout > 0 && c.WriteTimeout <= c.RemoteWrite.AckTimeout {
		errs = append(errs, fmt.Errorf("beacon: write_timeout %v must exceed remote_write.ack_timeout %v, or answers would be cut off while waiting for the broker",
			c.WriteTimeout, c.RemoteWrite.AckTimeout))
	}
	return errors.Join(errs...)
}

// newRemoteWrite builds the remote write handler when the route is on.
func (s *Server) newRemoteWrite(reg prometheus.Registerer) error {
	if !s.cfg.RemoteWrite.On() {
		return nil
	}
	h, err := promwrite.New(s.cfg.RemoteWrite.Config, s.producer, reg, s.logger.With("route", promwrite.Path))
	if err != nil {
		return fmt.Errorf("beacon: remote_write: %w", err)
	}
	s.remoteWrite = h
	return nil
}

// remoteWriteRoutes adds the remote write route to mux when it is on. The
// handler answers every method itself (405 for all but POST).
func (s *Server) remoteWriteRoutes(mux *http.ServeMux) {
	if s.remoteWrite != nil {
		mux.Handle(routeRemoteWrite, s.remoteWrite)
	}
}

// RemoteWriteOn reports whether the server serves remote write at
// promwrite.Path.
func (s *Server) RemoteWriteOn() bool { return s.remoteWrite != nil }
