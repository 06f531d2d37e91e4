package otlp

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// The OTLP/HTTP content types (opentelemetry.io/docs/specs/otlp/#otlphttp).
const (
	contentProto = "application/x-protobuf"
	contentJSON  = "application/json"
)

// HTTPHandler serves POST /v1/logs, /v1/metrics and /v1/traces (without
// the authentication Start puts in front of it).
func (r *Receiver) HTTPHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/v1/logs", r.route("logs"))
	mux.Handle("/v1/metrics", r.route("metrics"))
	mux.Handle("/v1/traces", r.route("traces"))
	return mux
}

func (r *Receiver) route(signal string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		code := r.serveHTTP(w, req, signal)
		r.metrics.requests.WithLabelValues(signal, "http", strconv.Itoa(code)).Inc()
	})
}

// serveHTTP answers one export request and returns its status.
func (r *Receiver) serveHTTP(w http.ResponseWriter, req *http.Request, signal string) int {
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		return plainAnswer(w, http.StatusMethodNotAllowed, "OTLP/HTTP takes POST requests")
	}
	mt, _, err := mime.ParseMediaType(req.Header.Get("Content-Type"))
	if err != nil || (mt != contentProto && mt != contentJSON) {
		return plainAnswer(w, http.StatusUnsupportedMediaType,
			fmt.Sprintf("Content-Type is %q; OTLP/HTTP sends %s or %s", req.Header.Get("Content-Type"), contentProto, contentJSON))
	}
	enc := strings.ToLower(strings.TrimSpace(req.Header.Get("Content-Encoding")))
	if enc != "" && enc != "identity" && enc != "gzip" {
		return plainAnswer(w, http.StatusUnsupportedMediaType, fmt.Sprintf("Content-Encoding %q is not served; send gzip or none", enc))
	}
	// The body is read before a slot is taken (readingBudget says why).
	raw, held, code, msg := r.readRaw(w, req)
	defer r.reading.give(held)
	switch {
	case code == http.StatusServiceUnavailable:
		return r.retryHTTP(w, mt, code, msg)
	case code != 0:
		return statusAnswer(w, mt, code, msg)
	}
	if !r.acquire() {
		return r.retryHTTP(w, mt, http.StatusServiceUnavailable, "too many OTLP requests in progress")
	}
	defer r.release()
	body, code, msg := r.decodeBody(raw, enc == "gzip")
	if code != 0 {
		return statusAnswer(w, mt, code, msg)
	}
	var (
		o    outcome
		resp interface{ MarshalProto() ([]byte, error) }
		json interface{ MarshalJSON() ([]byte, error) }
	)
	switch signal {
	case "logs":
		ex := plogotlp.NewExportRequest()
		if err := unmarshal(ex, mt, body); err != nil {
			return statusAnswer(w, mt, http.StatusBadRequest, err.Error())
		}
		o = r.exportLogs(req.Context(), ex.Logs())
		rs := plogotlp.NewExportResponse()
		if o.rejected > 0 {
			rs.PartialSuccess().SetRejectedLogRecords(int64(o.rejected))
			rs.PartialSuccess().SetErrorMessage(o.message)
		}
		resp, json = rs, rs
	case "metrics":
		ex := pmetricotlp.NewExportRequest()
		if err := unmarshal(ex, mt, body); err != nil {
			return statusAnswer(w, mt, http.StatusBadRequest, err.Error())
		}
		o = r.exportMetrics(req.Context(), ex.Metrics())
		rs := pmetricotlp.NewExportResponse()
		if o.rejected > 0 {
			rs.PartialSuccess().SetRejectedDataPoints(int64(o.rejected))
			rs.PartialSuccess().SetErrorMessage(o.message)
		}
		resp, json = rs, rs
	default:
		ex := ptraceotlp.NewExportRequest()
		if err := unmarshal(ex, mt, body); err != nil {
			return statusAnswer(w, mt, http.StatusBadRequest, err.Error())
		}
		o = r.exportTraces(req.Context(), ex.Traces())
		rs := ptraceotlp.NewExportResponse()
		if o.rejected > 0 {
			rs.PartialSuccess().SetRejectedSpans(int64(o.rejected))
			rs.PartialSuccess().SetErrorMessage(o.message)
		}
		resp, json = rs, rs
	}
	switch o.retry {
	case retryBackedUp:
		return r.retryHTTP(w, mt, http.StatusTooManyRequests, o.message)
	case retryUnavailable:
		return r.retryHTTP(w, mt, http.StatusServiceUnavailable, o.message)
	}
	var out []byte
	if mt == contentJSON {
		out, err = json.MarshalJSON()
	} else {
		out, err = resp.MarshalProto()
	}
	if err != nil {
		return plainAnswer(w, http.StatusInternalServerError, "encoding the response failed: "+err.Error())
	}
	w.Header().Set("Content-Type", mt)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
	return http.StatusOK
}

// request is what the three Export*ServiceRequest types share.
type request interface {
	UnmarshalProto([]byte) error
	UnmarshalJSON([]byte) error
}

// unmarshal decodes body as contentType. JSON nesting is checked first:
// pdata's protobuf decoder stops at 100 levels, its JSON decoder does not.
func unmarshal(ex request, contentType string, body []byte) error {
	if contentType == contentJSON {
		if err := checkJSONDepth(body, maxJSONDepth); err != nil {
			return err
		}
		if err := ex.UnmarshalJSON(body); err != nil {
			return fmt.Errorf("the body is not an OTLP JSON export request: %w", err)
		}
		return nil
	}
	if err := ex.UnmarshalProto(body); err != nil {
		return fmt.Errorf("the body is not an OTLP protobuf export request: %w", err)
	}
	return nil
}

// readRaw reads the body as sent, within MaxBodyBytes and the reading
// budget; held is what it took from the budget, given back by the caller.
// It answers the status and message of a failure (status 0: none; 503 is
// retryable).
func (r *Receiver) readRaw(w http.ResponseWriter, req *http.Request) (raw []byte, held int64, code int, msg string) {
	if req.ContentLength > r.cfg.MaxBodyBytes {
		return nil, 0, http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is %d bytes, more than the %d allowed", req.ContentLength, r.cfg.MaxBodyBytes)
	}
	br := &budgetReader{r: http.MaxBytesReader(w, req.Body, r.cfg.MaxBodyBytes), budget: r.reading}
	var buf bytes.Buffer
	_, err := buf.ReadFrom(br)
	if err != nil {
		if errors.Is(err, errReadingFull) {
			return nil, br.held, http.StatusServiceUnavailable, err.Error()
		}
		code, msg := bodyError(err, r.cfg.MaxBodyBytes)
		return nil, br.held, code, msg
	}
	return buf.Bytes(), br.held, 0, ""
}

// decodeBody gunzips raw, when gzipped, within MaxDecodedBytes; a gzip
// bomb is cut off at the limit, never inflated whole.
func (r *Receiver) decodeBody(raw []byte, gzipped bool) ([]byte, int, string) {
	if !gzipped {
		return raw, 0, ""
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, http.StatusBadRequest, "the gzip body is not gzip: " + err.Error()
	}
	defer zr.Close()
	var buf bytes.Buffer
	n, err := buf.ReadFrom(io.LimitReader(zr, r.cfg.MaxDecodedBytes+1))
	if err != nil {
		return nil, http.StatusBadRequest, "reading the gzip body failed: " + err.Error()
	}
	if n > r.cfg.MaxDecodedBytes {
		return nil, http.StatusRequestEntityTooLarge, fmt.Sprintf("the body decompresses to more than the %d bytes allowed", r.cfg.MaxDecodedBytes)
	}
	return buf.Bytes(), 0, ""
}

// bodyError is the answer to a failed read of the body.
func bodyError(err error, maxBody int64) (int, string) {
	if errors.As(err, new(*http.MaxBytesError)) {
		return http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is more than the %d bytes allowed", maxBody)
	}
	return http.StatusBadRequest, "reading the body failed: " + err.Error()
}

// retryHTTP answers a retryable failure with Retry-After.
func (r *Receiver) retryHTTP(w http.ResponseWriter, contentType string, code int, msg string) int {
	secs := int64((r.cfg.RetryAfter + time.Second - 1) / time.Second)
	w.Header().Set("Retry-After", strconv.FormatInt(max(secs, 1), 10))
	return statusAnswer(w, contentType, code, msg)
}

// httpCodes are the gRPC codes of the Status bodies of failed answers.
var httpCodes = map[int]codes.Code{
	http.StatusBadRequest:            codes.InvalidArgument,
	http.StatusRequestEntityTooLarge: codes.InvalidArgument,
	http.StatusTooManyRequests:       codes.ResourceExhausted,
	http.StatusServiceUnavailable:    codes.Unavailable,
}

// statusAnswer writes a failed answer: a google.rpc.Status in the
// request's encoding, as OTLP/HTTP specifies.
func statusAnswer(w http.ResponseWriter, contentType string, code int, msg string) int {
	st := status.New(httpCodes[code], msg).Proto()
	var out []byte
	var err error
	if contentType == contentJSON {
		out, err = protojson.Marshal(st)
	} else {
		out, err = proto.Marshal(st)
	}
	if err != nil {
		return plainAnswer(w, code, msg)
	}
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(code)
	_, _ = w.Write(out)
	return code
}

// plainAnswer writes a plain-text answer to a request that is no OTLP
// request at all. A failed write means the client went away.
func plainAnswer(w http.ResponseWriter, code int, msg string) int {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, msg+"\n")
	return code
}
