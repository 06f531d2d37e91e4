package promwrite

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/agents/intake"
	"millrace/agents/ship"
	"millrace/audit"
	"millrace/schemas"
)

// The answers follow the remote write 1.0 spec
// (prometheus.io/docs/specs/prw/remote_write_spec/): Prometheus retries 5xx
// answers and never retries other 4xx ones, so
//
//   - 204: every sample was acknowledged by the broker;
//   - 400: the body is no snappy-compressed WriteRequest, or some samples are
//     invalid for the metric schema (the valid ones were produced, as a
//     Prometheus server writes the valid part of such a request);
//   - 405, 415: not a POST; not snappy-compressed protobuf of remote write 1.0
//     (a 2.0 sender falls back to 1.0 on 415);
//   - 413: over a limit of Config;
//   - 503 with Retry-After: too many requests in progress, the producer is
//     backed up or the broker did not acknowledge in time. 503 rather than
//     429: Prometheus retries 429 only when configured to, older versions
//     not at all.

// maxSnappyExpansion is the most a snappy block can expand: a 3-byte copy
// element writes at most 64 bytes. A header declaring more than this many
// times the block's size is corrupt, whatever the limits.
const maxSnappyExpansion = 22

// Path is where remote write is served: the path of Prometheus's own
// receiver (--web.enable-remote-write-receiver) and of VictoriaMetrics, so
// a remote_write url needs only the host changed.
const Path = "/api/v1/write"

// Handler serves POST /api/v1/write (Path). Build it with New.
type Handler struct {
	cfg      Config
	producer Producer
	logger   *slog.Logger
	metrics  *metrics
	kinds    *Kinds
	inFlight chan struct{} // a slot per request being decoded or published
	audit    *audit.Counter
	// newSource, when set, gives a request's gate on opening new audit
	// sources (audit.Counter.AddFrom); nil opens them freely.
	newSource func(*http.Request) func() bool
}

// New checks cfg (after defaults) and registers the handler's metrics with
// reg (nil registers none). logger nil discards.
func New(cfg Config, producer Producer, reg prometheus.Registerer, logger *slog.Logger) (*Handler, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if producer == nil {
		return nil, errors.New("promwrite: a producer is required")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	return &Handler{
		cfg: cfg, producer: producer, logger: logger.With("component", "promwrite", "topic", cfg.Topic),
		metrics: m, kinds: NewKinds(cfg.MaxFamilies), inFlight: make(chan struct{}, cfg.MaxInFlight),
	}, nil
}

// SetAudit makes the handler count acknowledged samples in c, by source and
// hour, as the beacon counts /v1/metrics (a counter of role
// audit.RoleIntake: metric samples, retries counted again); nil counts
// nothing. Call it before serving.
func (h *Handler) SetAudit(c *audit.Counter) { h.audit = c }

// SetNewSourceGate makes the audit ask gate(r), for a request r, whether
// its sender may open a source the audit does not count yet, as the
// beacon limits the new sources a client opens; samples of a source
// refused are counted in the audit's "(other)" source. Call it before
// serving.
func (h *Handler) SetNewSourceGate(gate func(r *http.Request) func() bool) { h.newSource = gate }

// ServeHTTP answers one remote write request.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	status := h.serve(w, r)
	h.metrics.requests.WithLabelValues(strconv.Itoa(status)).Inc()
}

// serve answers the request and returns the status it answered.
func (h *Handler) serve(w http.ResponseWriter, r *http.Request) int {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		return answer(w, http.StatusMethodNotAllowed, "remote write takes POST requests")
	}
	if msg := checkHeaders(r.Header); msg != "" {
		return answer(w, http.StatusUnsupportedMediaType, msg)
	}
	select {
	case h.inFlight <- struct{}{}:
		defer func() { <-h.inFlight }()
	default:
		return h.retryLater(w, "too many remote write requests in progress")
	}
	data, status, msg := h.readBody(w, r)
	if status != 0 {
		return answer(w, status, msg)
	}
	req, err := Decode(data, Limits{MaxSeries: h.cfg.MaxSeries, MaxSamples: h.cfg.MaxSamples,
		MaxLabels: h.cfg.MaxLabels, MaxMetadata: h.cfg.MaxMetadata})
	switch {
	case errors.Is(err, ErrTooLarge):
		return answer(w, http.StatusRequestEntityTooLarge, err.Error())
	case err != nil:
		return answer(w, http.StatusBadRequest, err.Error())
	}
	h.kinds.Learn(req.Metadata)
	conv := Convert(req, h.kinds)
	h.metrics.received.Add(float64(len(conv.Samples) + conv.Stale))
	h.metrics.dropped.WithLabelValues("stale").Add(float64(conv.Stale))
	h.metrics.dropped.WithLabelValues("native_histogram").Add(float64(req.Histograms))
	h.metrics.dropped.WithLabelValues("exemplar").Add(float64(req.Exemplars))

	var newSource func() bool
	if h.newSource != nil && h.audit != nil {
		newSource = h.newSource(r)
	}
	recs, acks, invalid := h.records(conv, requestSource(r, h.cfg.Source), newSource)
	if err := h.publish(r.Context(), recs, acks); err != nil {
		var pe *ship.Refusal
		if !errors.As(err, &pe) {
			pe = &ship.Refusal{Status: http.StatusInternalServerError, Reason: "publishing failed", Err: err}
		}
		h.logger.Warn("samples not acknowledged", "status", pe.Status, "err", pe)
		if pe.Status == http.StatusServiceUnavailable {
			return h.retryLater(w, pe.Reason)
		}
		return answer(w, pe.Status, pe.Reason)
	}
	if invalid != nil {
		return answer(w, http.StatusBadRequest, invalid.Error())
	}
	w.WriteHeader(http.StatusNoContent)
	return http.StatusNoContent
}

// checkHeaders returns why the request is not remote write 1.0, or "".
func checkHeaders(hd http.Header) string {
	if enc := hd.Get("Content-Encoding"); !strings.EqualFold(enc, "snappy") {
		return fmt.Sprintf("Content-Encoding is %q; remote write bodies are snappy-compressed (Content-Encoding: snappy)", enc)
	}
	mt, params, err := mime.ParseMediaType(hd.Get("Content-Type"))
	if err != nil || mt != "application/x-protobuf" {
		return fmt.Sprintf("Content-Type is %q; remote write 1.0 sends application/x-protobuf", hd.Get("Content-Type"))
	}
	if proto, ok := params["proto"]; ok && proto != "prometheus.WriteRequest" {
		return fmt.Sprintf("protobuf message %q is not served; only remote write 1.0 (prometheus.WriteRequest)", proto)
	}
	if v := hd.Get("X-Prometheus-Remote-Write-Version"); v != "" && !strings.HasPrefix(v, "0.1.") {
		return fmt.Sprintf("remote write version %q is not served; only 0.1.0 (remote write 1.0)", v)
	}
	return ""
}

// readBody reads and snappy-decodes the body within the limits, answering
// the status and message of a failure (status 0: none).
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, int, string) {
	if r.ContentLength > h.cfg.MaxBodyBytes {
		return nil, http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is %d bytes, more than the %d allowed", r.ContentLength, h.cfg.MaxBodyBytes)
	}
	// A known length is read into one buffer (ReadFrom wants MinRead bytes
	// free before each read), instead of io.ReadAll's doublings.
	buf := bytes.NewBuffer(make([]byte, 0, max(r.ContentLength, 0)+bytes.MinRead))
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, h.cfg.MaxBodyBytes))
	compressed := buf.Bytes()
	if err != nil {
		if errors.As(err, new(*http.MaxBytesError)) {
			return nil, http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is more than the %d bytes allowed", h.cfg.MaxBodyBytes)
		}
		return nil, http.StatusBadRequest, "reading the body failed: " + err.Error()
	}
	n, err := snappy.DecodedLen(compressed)
	if err != nil {
		return nil, http.StatusBadRequest, "the body is not snappy block-compressed: " + err.Error()
	}
	if int64(n) > h.cfg.MaxDecodedBytes {
		return nil, http.StatusRequestEntityTooLarge, fmt.Sprintf("the body decodes to %d bytes, more than the %d allowed", n, h.cfg.MaxDecodedBytes)
	}
	if n > maxSnappyExpansion*len(compressed) {
		return nil, http.StatusBadRequest, fmt.Sprintf("the snappy header declares %d bytes, more than %d compressed bytes can hold", n, len(compressed))
	}
	// DecodeStrict is the standard snappy block format Prometheus writes
	// (golang/snappy); Decode would also take S2's extensions.
	data, err := snappy.DecodeStrict(make([]byte, n), compressed)
	if err != nil {
		return nil, http.StatusBadRequest, "the body is not snappy block-compressed: " + err.Error()
	}
	return data, 0, ""
}

// records encodes the samples as the beacon's /v1/metrics does (one
// metric-sample event per record, keyed by name), with each record's
// acknowledgement counted. Samples the metric schema refuses are dropped,
// counted, and make the error returned.
func (h *Handler) records(conv Converted, source string, newSource func() bool) ([]*kgo.Record, []ship.AckFunc, error) {
	recs := make([]*kgo.Record, 0, len(conv.Samples))
	acks := make([]ship.AckFunc, 0, len(conv.Samples))
	row := schemas.Metric.NewRow()
	var firstErr error
	invalid := 0
	for _, s := range conv.Samples {
		value, err := s.Encode(nil, row, source)
		if err == nil && s.Name == "" {
			err = errors.New("the series has no __name__ label")
		}
		if err != nil {
			invalid++
			if firstErr == nil {
				firstErr = fmt.Errorf("sample %q: %w", s.Name, err)
			}
			continue
		}
		recs = append(recs, &kgo.Record{Topic: h.cfg.Topic, Key: []byte(s.Name), Value: value})
		acks = append(acks, h.acked(source, s, newSource))
	}
	h.metrics.dropped.WithLabelValues("invalid").Add(float64(invalid))
	if invalid > 0 {
		return recs, acks, fmt.Errorf("%d samples are invalid and were dropped; the first: %w", invalid, firstErr)
	}
	return recs, acks, nil
}

// acked counts the sample once the broker acknowledged its record.
func (h *Handler) acked(source string, s intake.Sample, newSource func() bool) ship.AckFunc {
	return func(_ *kgo.Record, err error) {
		if err != nil {
			return
		}
		h.metrics.produced.Inc()
		if h.audit != nil {
			h.audit.AddFrom(h.cfg.Topic, audit.MetricSource(source), s.TS, 1, newSource)
		}
	}
}

// requestSource is the "source" query parameter, else the X-Millrace-Source
// header, else def, else the client's IP address (the beacon's order).
func requestSource(r *http.Request, def string) string {
	if s := r.URL.Query().Get("source"); s != "" {
		return s
	}
	if s := r.Header.Get("X-Millrace-Source"); s != "" {
		return s
	}
	if def != "" {
		return def
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// retryLater answers 503 with Retry-After.
func (h *Handler) retryLater(w http.ResponseWriter, msg string) int {
	secs := int64((h.cfg.RetryAfter + time.Second - 1) / time.Second)
	w.Header().Set("Retry-After", strconv.FormatInt(max(secs, 1), 10))
	return answer(w, http.StatusServiceUnavailable, msg)
}

// answer writes a plain-text answer and returns its status; Prometheus
// logs the body of a failed request. A failed write means the sender went
// away.
func answer(w http.ResponseWriter, status int, msg string) int {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, msg+"\n")
	return status
}
