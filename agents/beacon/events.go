package beacon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/agents/ship"
	"millrace/schemas"
)

// reqInfo is what the server adds to every event of a request.
type reqInfo struct {
	receivedAt time.Time
	addr       netip.Addr
	ip         string // as stored: possibly truncated
	userAgent  string
	referer    string
}

func (s *Server) info(r *http.Request) reqInfo {
	a := s.ips.clientAddr(r)
	return reqInfo{
		receivedAt: s.now().UTC(),
		addr:       a,
		ip:         s.ips.display(a),
		userAgent:  r.UserAgent(),
		referer:    r.Referer(),
	}
}

// errBodyTooLarge and friends are the request-level failures of reading and
// splitting a body; each maps to one status.
var (
	errBadJSON     = errors.New("body is not a JSON object or array of objects")
	errTooMany     = errors.New("too many events in one request")
	errEmptyBody   = errors.New("empty body")
	errContentType = errors.New("content type must be application/json or text/plain")
)

// readBody reads the body, at most MaxBodyBytes of it and within
// BodyReadTimeout; otherwise it answers itself (413, 408 or 400) and
// returns false. A request without a body gives nil.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, true
	}
	rc := http.NewResponseController(w)
	// ErrNotSupported (a handler mounted on a recorder, not a connection)
	// leaves the server's ReadTimeout as the only bound.
	deadlineSet := rc.SetReadDeadline(time.Now().Add(s.cfg.BodyReadTimeout)) == nil
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		// The deadline stays: the connection is closed after the answer,
		// and any further read of it fails at once.
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			s.fail(w, r, http.StatusRequestEntityTooLarge,
				"body larger than "+strconv.FormatInt(s.cfg.MaxBodyBytes, 10)+" bytes")
		case errors.Is(err, os.ErrDeadlineExceeded):
			w.Header().Set("Connection", "close")
			s.fail(w, r, http.StatusRequestTimeout,
				"body not received within "+s.cfg.BodyReadTimeout.String())
		default:
			s.fail(w, r, http.StatusBadRequest, "reading the body: "+err.Error())
		}
		return nil, false
	}
	if deadlineSet {
		// net/http reads the connection in the background while the
		// handler runs, to notice a client that goes away; left in place,
		// the deadline would fire there while the request waits for the
		// broker, and cancel it.
		if err := rc.SetReadDeadline(time.Time{}); err != nil {
			s.fail(w, r, http.StatusInternalServerError, "clearing the read deadline: "+err.Error())
			return nil, false
		}
	}
	return body, true
}

// jsonContentType accepts JSON and text/plain (navigator.sendBeacon with a
// string sends text/plain;charset=UTF-8, which needs no CORS preflight), and
// a missing type (curl -d without -H).
func jsonContentType(r *http.Request) bool {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	return mt == "application/json" || mt == "text/plain"
}

// requireJSON answers 415 to a request whose content type jsonContentType
// refuses, before anything else is spent on it.
func (s *Server) requireJSON(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !jsonContentType(r) {
			s.fail(w, r, http.StatusUnsupportedMediaType, errContentType.Error())
			return
		}
		next(w, r)
	}
}

// splitEvents returns the raw JSON of each event of a body holding one
// object or an array. Elements are only checked to be JSON here; the schema
// decides whether each is an acceptable event. It stops reading an array as
// soon as it holds more than limit elements.
func splitEvents(body []byte, limit int) ([]json.RawMessage, error) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return nil, errEmptyBody
	}
	switch body[0] {
	case '{':
		if !json.Valid(body) {
			return nil, errBadJSON
		}
		return []json.RawMessage{body}, nil
	case '[':
	default:
		return nil, errBadJSON
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if _, err := dec.Token(); err != nil {
		return nil, errBadJSON
	}
	var out []json.RawMessage
	for dec.More() {
		if len(out) == limit {
			return nil, errTooMany
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, errBadJSON
		}
		out = append(out, raw)
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim(']') {
		return nil, errBadJSON
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errBadJSON
	}
	return out, nil
}

// splitFailure answers a body that could not be split into events.
func (s *Server) splitFailure(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, errTooMany) {
		s.fail(w, r, http.StatusRequestEntityTooLarge,
			"more than "+strconv.Itoa(s.cfg.MaxEventsPerRequest)+" events in one request")
		return
	}
	s.fail(w, r, http.StatusBadRequest, err.Error())
}

// handleEvents is POST /v1/events.
func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request, body []byte) {
	raws, err := splitEvents(body, s.cfg.MaxEventsPerRequest)
	if err != nil {
		s.splitFailure(w, r, err)
		return
	}
	info := s.info(r)
	if s.doNotTrack(r) {
		s.metrics.events.WithLabelValues("click", "dropped").Add(float64(len(raws)))
		writeJSON(w, http.StatusOK, result{Dropped: len(raws)})
		return
	}
	res, recs, err := s.clickRecords(r.Context(), info, raws, false)
	if err != nil {
		s.failPublish(w, r, err)
		return
	}
	if err := s.publish(r.Context(), recs, res.marks); err != nil {
		s.failPublish(w, r, err)
		return
	}
	s.countResult("click", res)
	writeJSON(w, res.status(), res)
}

func (s *Server) doNotTrack(r *http.Request) bool {
	return s.cfg.HonorDoNotTrack && r.Header.Get("DNT") == "1"
}

func (s *Server) countResult(stream string, res *result) {
	s.metrics.events.WithLabelValues(stream, "accepted").Add(float64(res.Accepted))
	s.metrics.events.WithLabelValues(stream, "rejected").Add(float64(res.Rejected))
	s.metrics.madeIDs.Add(float64(res.madeIDs))
}

// Column indexes of the click fields the beacon sets.
var (
	clickURL      = schemas.Click.FieldIndex("url")
	clickReferrer = schemas.Click.FieldIndex("referrer")
)

// clickRecords validates and enriches each event and returns the records to
// produce: the valid events for the topic and the rejected ones, in a
// dead-letter envelope, for the DLQ topic. pixel marks a /b.gif request,
// whose Referer header is the page showing the image (the event's url)
// rather than the page before it. An error (a *ship.Refusal) means the
// request cannot be judged now: an event's schema could not be had from
// the registry.
func (s *Server) clickRecords(ctx context.Context, info reqInfo, raws []json.RawMessage, pixel bool) (*result, []*kgo.Record, error) {
	res := &result{}
	recs := make([]*kgo.Record, 0, len(raws))
	row := schemas.Click.NewRow()
	newSource := s.newSourceGate(info)
	for i, raw := range raws {
		rec, err := s.clickRecord(ctx, row, info, raw, pixel, &res.madeIDs)
		var unjudged *ship.Refusal
		if errors.As(err, &unjudged) {
			return nil, nil, err
		}
		if err != nil {
			res.Rejected++
			res.Errors = append(res.Errors, rejection{Index: i, Reason: err.Error()})
			recs = append(recs, s.deadLetter(s.cfg.DLQTopic, "click", info, raw, err))
			res.marks = append(res.marks, auditMark{})
			continue
		}
		res.Accepted++
		recs = append(recs, rec)
		res.marks = append(res.marks, s.clickMark(row, newSource))
	}
	return res, recs, nil
}

// eventID is the id an event is stored with. A client's UUID is kept, so
// that a retried request (beacon.js keeps its ids across retries) is a
// repeat the sink can drop: any version, in any form uuid.Parse reads
// (canonical, {braces}, urn:uuid:, 32 hex digits), normalised to lower-case
// canonical form, so that two spellings of one id stay one id. The nil and
// max UUIDs are placeholders rather than ids (every such event would be a
// repeat of the first), so they, and anything that is not a UUID, are
// replaced by a new UUIDv7, and made reports it.
func eventID(client string) (id string, made bool, err error) {
	if u, err := uuid.Parse(client); err == nil && u != uuid.Nil && u != uuid.Max {
		return u.String(), false, nil
	}
	u, err := uuid.NewV7()
	if err != nil {
		return "", false, err
	}
	return u.String(), true, nil
}

// clickRecord validates and enriches one event; madeIDs counts the events
// whose id the server had to make.
func (s *Server) clickRecord(ctx context.Context, row *schemas.Row, info reqInfo, raw []byte, pixel bool, madeIDs *int) (*kgo.Record, error) {
	if err := row.Decode(raw); err != nil {
		return nil, err
	}
	eventType, _ := row.Get("type").(string)
	if eventType == "" {
		return nil, &schemas.ValidationError{Schema: schemas.Click.Name, Field: "type",
			Err: schemas.ErrBadValue, Detail: "must not be empty"}
	}
	if err := s.eventSchemas.check(ctx, eventType, raw); err != nil {
		return nil, err
	}
	client, _ := row.Get("event_id").(string)
	id, made, err := eventID(client)
	if err != nil {
		return nil, err
	}
	if made {
		*madeIDs++
	}
	// Set can only fail on a Go type that does not match the field, which
	// these literal calls rule out; errors.Join keeps the check honest.
	err = errors.Join(
		row.Set("event_id", id),
		row.Set("received_at", info.receivedAt),
		row.Set("ip", nilIfEmpty(info.ip)),
		s.clampTS(row, info.receivedAt),
	)
	if info.userAgent != "" {
		err = errors.Join(err, row.Set("user_agent", info.userAgent))
	}
	if info.referer != "" {
		switch {
		case pixel && !row.Has(clickURL):
			err = errors.Join(err, row.Set("url", info.referer))
		case !pixel && !row.Has(clickReferrer):
			err = errors.Join(err, row.Set("referrer", info.referer))
		}
	}
	if err != nil {
		return nil, err
	}
	rec := &kgo.Record{
		Topic:   s.cfg.Topic,
		Value:   row.AppendJSON(nil),
		Headers: []kgo.RecordHeader{{Key: "event_id", Value: []byte(id)}},
	}
	// One visitor's events share a partition, in order.
	if aid, _ := row.Get("anonymous_id").(string); aid != "" {
		rec.Key = []byte(aid)
	} else if uid, _ := row.Get("user_id").(string); uid != "" {
		rec.Key = []byte(uid)
	}
	return rec, nil
}

// clampTS keeps a click's ts within MaxClockSkew of the time it was
// received: the sinks file events by ts, so a clock years off (or a
// hostile client) would otherwise open a lake directory, and a Parquet
// file, per event. The client's value is kept in client_ts when it is
// moved; client_ts is the server's to set, so a client-sent one is
// dropped.
func (s *Server) clampTS(row *schemas.Row, receivedAt time.Time) error {
	ts, ok := row.Get("ts").(time.Time)
	lo, hi := receivedAt.Add(-s.cfg.MaxClockSkew), receivedAt.Add(s.cfg.MaxClockSkew)
	if !ok || (!ts.Before(lo) && !ts.After(hi)) {
		return row.Set("client_ts", nil)
	}
	clamped := lo
	if ts.After(hi) {
		clamped = hi
	}
	return errors.Join(row.Set("client_ts", ts), row.Set("ts", clamped))
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// deadLetter wraps a rejected event: the reason, the original payload (as
// JSON when it is JSON, else as a string), and what the server knew.
func (s *Server) deadLetter(topic, schema string, info reqInfo, raw []byte, reason error) *kgo.Record {
	env := struct {
		Reason     string          `json:"reason"`
		Schema     string          `json:"schema"`
		Payload    json.RawMessage `json:"payload"`
		ReceivedAt string          `json:"received_at"`
		IP         string          `json:"ip,omitempty"`
		UserAgent  string          `json:"user_agent,omitempty"`
	}{
		Reason:     reason.Error(),
		Schema:     schema,
		Payload:    raw,
		ReceivedAt: info.receivedAt.Format(time.RFC3339Nano),
		IP:         info.ip,
		UserAgent:  info.userAgent,
	}
	if !json.Valid(raw) {
		env.Payload, _ = json.Marshal(string(raw)) // a string always marshals
	}
	value, err := json.Marshal(env)
	if err != nil {
		value = []byte(`{"reason":"unencodable event"}`)
	}
	return &kgo.Record{Topic: topic, Value: value}
}

// pixelEvent builds an event's JSON from /b.gif query parameters: the click
// fields by name, ts as epoch milliseconds or RFC 3339, "properties" as a
// JSON object, "eid" as the event_id (short, for hand-written image URLs;
// it wins over an event_id parameter), and any other parameter as a string
// property (the schema decoder folds unknown top-level fields into
// properties). The first value of a repeated parameter wins.
func pixelEvent(q map[string][]string) []byte {
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	_, hasEID := q["eid"]
	out := []byte{'{'}
	for _, k := range keys {
		if len(q[k]) == 0 || k == "" || (k == "event_id" && hasEID) {
			continue
		}
		v := q[k][0]
		if len(out) > 1 {
			out = append(out, ',')
		}
		name := k
		if k == "eid" {
			name = "event_id"
		}
		out = schemas.AppendJSONString(out, name)
		out = append(out, ':')
		ms, msErr := strconv.ParseInt(v, 10, 64)
		switch {
		case k == "ts" && msErr == nil:
			// Re-formatted: "00" or "+5" parse but are not JSON numbers.
			out = strconv.AppendInt(out, ms, 10)
		case k == "properties" && len(v) > 0 && v[0] == '{' && json.Valid([]byte(v)):
			out = append(out, v...)
		default:
			out = schemas.AppendJSONString(out, v)
		}
	}
	return append(out, '}')
}

// handlePixel is GET /b.gif.
func (s *Server) handlePixel(w http.ResponseWriter, r *http.Request, _ []byte) {
	if r.Method == http.MethodHead {
		// Link checkers and prefetchers: not a view.
		writePixel(w, http.StatusOK)
		return
	}
	info := s.info(r)
	if s.doNotTrack(r) {
		s.metrics.events.WithLabelValues("click", "dropped").Inc()
		writePixel(w, http.StatusOK)
		return
	}
	raw := pixelEvent(r.URL.Query())
	res, recs, err := s.clickRecords(r.Context(), info, []json.RawMessage{raw}, true)
	if err != nil {
		s.failPublish(w, r, err)
		return
	}
	if err := s.publish(r.Context(), recs, res.marks); err != nil {
		s.failPublish(w, r, err)
		return
	}
	s.countResult("click", res)
	w.Header().Set("X-Millrace-Accepted", strconv.Itoa(res.Accepted))
	w.Header().Set("X-Millrace-Rejected", strconv.Itoa(res.Rejected))
	writePixel(w, res.status())
}

// transparentGIF is the smallest transparent 1x1 GIF89a (43 bytes).
var transparentGIF = []byte{
	'G', 'I', 'F', '8', '9', 'a', 1, 0, 1, 0, 0x80, 0, 0, // header, 1x1, 2-colour table
	0, 0, 0, 0xff, 0xff, 0xff, // colour table: black, white
	0x21, 0xf9, 4, 1, 0, 0, 0, 0, // graphic control: colour 0 is transparent
	0x2c, 0, 0, 0, 0, 1, 0, 1, 0, 0, // image descriptor
	2, 2, 0x44, 1, 0, // LZW data
	0x3b, // trailer
}

// writePixel answers with the GIF whatever the status: an <img> shows
// nothing either way, and the status still tells monitoring what happened.
func writePixel(w http.ResponseWriter, status int) {
	h := w.Header()
	h.Set("Content-Type", "image/gif")
	h.Set("Content-Length", strconv.Itoa(len(transparentGIF)))
	// Every view must reach the server: no cache may answer for it.
	h.Set("Cache-Control", "no-cache, no-store, must-revalidate, private, max-age=0")
	h.Set("Pragma", "no-cache")
	h.Set("Expires", "Thu, 01 Jan 1970 00:00:00 GMT")
	w.WriteHeader(status)
	_, _ = w.Write(transparentGIF) // a failed write is the client's loss only
}
