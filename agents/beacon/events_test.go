package beacon

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image/gif"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"millrace/agents/ship"
)

// yearsOfSkew lets the fixed, years-old client times of the decoding tests
// through unclamped; TestClientTSClamped tests the clamp.
const yearsOfSkew = 20 * 365 * 24 * time.Hour

func TestPixel(t *testing.T) {
	h := newHarness(t, Config{MaxClockSkew: yearsOfSkew}, ship.Config{})
	q := url.Values{"type": {"page_view"}, "url": {"https://shop.example.com/p/1"},
		"ts": {"1700000000123"}, "campaign": {"spring"}, "anonymous_id": {"a-1"}}
	resp, body := h.do(http.MethodGet, "/b.gif?"+q.Encode(), "", "", map[string]string{
		"User-Agent": "test-agent/1.0", "Referer": "https://search.example.org/"})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "image/gif" {
		t.Fatalf("content type %q", ct)
	}
	for _, want := range []string{"no-cache", "no-store", "max-age=0"} {
		if cc := resp.Header.Get("Cache-Control"); !strings.Contains(cc, want) {
			t.Errorf("Cache-Control %q lacks %q", cc, want)
		}
	}
	img, err := gif.Decode(strings.NewReader(body))
	if err != nil {
		t.Fatalf("answer is not a GIF: %v", err)
	}
	if b := img.Bounds(); b.Dx() != 1 || b.Dy() != 1 {
		t.Fatalf("GIF is %v, want 1x1", b)
	}
	if _, _, _, a := img.At(0, 0).RGBA(); a != 0 {
		t.Fatalf("pixel alpha %d, want transparent", a)
	}
	evs := h.events(topic)
	if len(evs) != 1 {
		t.Fatalf("%d events, want 1", len(evs))
	}
	e := evs[0]
	want := map[string]any{"type": "page_view", "url": "https://shop.example.com/p/1",
		"ts": "2023-11-14T22:13:20.123Z", "ip": "127.0.0.1", "user_agent": "test-agent/1.0",
		"anonymous_id": "a-1"}
	for k, v := range want {
		if e[k] != v {
			t.Errorf("%s = %v, want %v", k, e[k], v)
		}
	}
	if props, _ := e["properties"].(map[string]any); props["campaign"] != "spring" {
		t.Errorf("properties %v, want campaign=spring", e["properties"])
	}
	checkServerFields(t, e)
}

// checkServerFields checks the fields the beacon always adds.
func checkServerFields(t *testing.T, e map[string]any) {
	t.Helper()
	id, _ := e["event_id"].(string)
	u, err := uuid.Parse(id)
	if err != nil {
		t.Errorf("event_id %q is not a UUID: %v", id, err)
	}
	if u.Version() != 7 {
		t.Errorf("event_id %q is version %d, want 7", id, u.Version())
	}
	ra, _ := e["received_at"].(string)
	at, err := time.Parse(time.RFC3339Nano, ra)
	if err != nil || !strings.HasSuffix(ra, "Z") {
		t.Errorf("received_at %q is not RFC 3339 UTC", ra)
	}
	if time.Since(at) > time.Minute || time.Since(at) < 0 {
		t.Errorf("received_at %v is not now", at)
	}
}

func TestPixelURLFromReferer(t *testing.T) {
	h := newHarness(t, Config{}, ship.Config{})
	resp, _ := h.do(http.MethodGet, "/b.gif?type=page_view", "", "", map[string]string{"Referer": "https://shop.example.com/cart"})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	e := h.events(topic)[0]
	if e["url"] != "https://shop.example.com/cart" || e["referrer"] != nil {
		t.Fatalf("url %v referrer %v: a pixel's Referer is the page showing it", e["url"], e["referrer"])
	}
	// A pixel without a type is rejected: GIF still, status 400, DLQ record.
	resp, body := h.do(http.MethodGet, "/b.gif?url=x", "", "", nil)
	if resp.StatusCode != http.StatusBadRequest || !bytes.Equal([]byte(body), transparentGIF) {
		t.Fatalf("status %d, body %d bytes", resp.StatusCode, len(body))
	}
	if n := h.endOffset(dlqTopic); n != 1 {
		t.Fatalf("%d dead letters, want 1", n)
	}
}

func TestPostSingleAndBatch(t *testing.T) {
	h := newHarness(t, Config{MaxClockSkew: yearsOfSkew}, ship.Config{})
	clientID := "0190f3c2-7b1e-7abc-8def-0123456789ab"
	resp, res := h.post("/v1/events", "application/json",
		`{"type":"signup","event_id":"`+clientID+`","ts":"2024-05-01T12:00:00+02:00","user_id":"u-9","plan":"pro","properties":{"step":2}}`)
	if resp.StatusCode != http.StatusOK || res.Accepted != 1 || res.Rejected != 0 {
		t.Fatalf("single: %d %+v", resp.StatusCode, res)
	}
	resp, res = h.post("/v1/events", "text/plain;charset=UTF-8",
		`[{"type":"page_view","url":"https://a/1","ts":1714557600000},{"type":"click","event_id":"not-a-uuid"},{"type":"page_view","referrer":""}]`)
	if resp.StatusCode != http.StatusOK || res.Accepted != 3 || res.Rejected != 0 {
		t.Fatalf("batch: %d %+v", resp.StatusCode, res)
	}
	evs := h.events(topic)
	if len(evs) != 4 {
		t.Fatalf("%d events, want 4", len(evs))
	}
	var signup map[string]any
	for _, e := range evs {
		checkServerFields(t, e)
		if e["type"] == "signup" {
			signup = e
		}
		if e["type"] == "click" && e["event_id"] == "not-a-uuid" {
			t.Errorf("a non-UUID client event_id was kept")
		}
	}
	if signup == nil {
		t.Fatal("signup event missing")
	}
	if signup["event_id"] != clientID {
		t.Errorf("event_id %v, want the client's UUID %s kept", signup["event_id"], clientID)
	}
	if signup["ts"] != "2024-05-01T10:00:00Z" {
		t.Errorf("ts %v, want normalised to UTC", signup["ts"])
	}
	props, _ := signup["properties"].(map[string]any)
	if props["plan"] != "pro" || props["step"] != float64(2) {
		t.Errorf("properties %v: the unknown top-level field must be folded in", props)
	}
	if signup["referrer"] != nil {
		t.Errorf("referrer %v set without a Referer header", signup["referrer"])
	}
	for _, e := range evs {
		if e["type"] == "page_view" && e["url"] == "https://a/1" && e["ts"] != "2024-05-01T10:00:00Z" {
			t.Errorf("epoch ms ts became %v", e["ts"])
		}
	}
}

// TestRecordJSONShape checks one event's JSON byte for byte against the
// click format: fields in schema order, server fields filled in.
func TestRecordJSONShape(t *testing.T) {
	h := newHarness(t, Config{TruncateIP: true}, ship.Config{})
	h.server.now = func() time.Time { return time.Date(2024, 5, 1, 10, 0, 0, 123456000, time.UTC) }
	resp, b := h.do(http.MethodPost, "/v1/events", "application/json",
		`{"type":"click","url":"https://s/x","title":"T","anonymous_id":"a","session_id":"s","ts":1714557600000,"properties":{"k":"v"}}`,
		map[string]string{"User-Agent": "UA", "Referer": "https://s/prev"})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d %s", resp.StatusCode, b)
	}
	recs := h.records(topic)
	if len(recs) != 1 {
		t.Fatalf("%d records", len(recs))
	}
	got := string(recs[0].Value)
	re := regexp.MustCompile(`^\{"event_id":"[0-9a-f-]{36}",` + regexp.QuoteMeta(
		`"type":"click","url":"https://s/x","referrer":"https://s/prev","title":"T","anonymous_id":"a","session_id":"s",`+
			`"ts":"2024-05-01T10:00:00Z","received_at":"2024-05-01T10:00:00.123456Z","ip":"127.0.0.0","user_agent":"UA","properties":{"k":"v"}}`) + `$`)
	if !re.MatchString(got) {
		t.Fatalf("record %s", got)
	}
	if string(recs[0].Key) != "a" {
		t.Errorf("key %q, want the anonymous id", recs[0].Key)
	}
	if len(recs[0].Headers) != 1 || recs[0].Headers[0].Key != "event_id" || !strings.Contains(got, string(recs[0].Headers[0].Value)) {
		t.Errorf("headers %v, want the event_id", recs[0].Headers)
	}
}

func TestRequestLimits(t *testing.T) {
	h := newHarness(t, Config{MaxBodyBytes: 4096, MaxEventsPerRequest: 3}, ship.Config{})
	big := `{"type":"x","properties":{"pad":"` + strings.Repeat("a", 5000) + `"}}`
	many := `[{"type":"a"},{"type":"b"},{"type":"c"},{"type":"d"}]`
	for _, tc := range []struct {
		name, contentType, body string
		status                  int
	}{
		{"oversized body", "application/json", big, http.StatusRequestEntityTooLarge},
		{"too many events", "application/json", many, http.StatusRequestEntityTooLarge},
		{"bad JSON", "application/json", `{"type":"x"`, http.StatusBadRequest},
		{"bad JSON in array", "text/plain", `[{"type":"x"},{]`, http.StatusBadRequest},
		{"trailing data", "application/json", `[{"type":"x"}] {}`, http.StatusBadRequest},
		{"not an object", "application/json", `"hello"`, http.StatusBadRequest},
		{"empty", "application/json", ``, http.StatusBadRequest},
		{"wrong content type", "application/xml", `<x/>`, http.StatusUnsupportedMediaType},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, res := h.post("/v1/events", tc.contentType, tc.body)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d (%+v)", resp.StatusCode, tc.status, res)
			}
			if res.Error == "" {
				t.Errorf("no error reason in the answer")
			}
		})
	}
	if n := h.endOffset(topic) + h.endOffset(dlqTopic); n != 0 {
		t.Fatalf("%d records produced for refused requests", n)
	}
	// At the limit exactly, everything passes.
	resp, res := h.post("/v1/events", "application/json", `[{"type":"a"},{"type":"b"},{"type":"c"}]`)
	if resp.StatusCode != http.StatusOK || res.Accepted != 3 {
		t.Fatalf("3 events: %d %+v", resp.StatusCode, res)
	}
}

func TestInvalidEventsGoToDLQ(t *testing.T) {
	h := newHarness(t, Config{}, ship.Config{})
	body := `[{"type":"ok1"},{"url":"https://no/type"},{"type":"bad_ts","ts":"yesterday"},5,{"type":""},{"type":"ok2","user_id":7}]`
	resp, res := h.post("/v1/events", "application/json", body)
	if resp.StatusCode != http.StatusOK || res.Accepted != 1 || res.Rejected != 5 {
		t.Fatalf("status %d %+v", resp.StatusCode, res)
	}
	wantReasons := map[int]string{1: `field "type": missing`, 2: `field "ts": bad timestamp`, 3: "malformed",
		4: `field "type": bad value`, 5: `field "user_id": wrong type`}
	for _, r := range res.Errors {
		if !strings.Contains(r.Reason, wantReasons[r.Index]) {
			t.Errorf("event %d reason %q, want it to mention %q", r.Index, r.Reason, wantReasons[r.Index])
		}
		delete(wantReasons, r.Index)
	}
	if len(wantReasons) != 0 {
		t.Errorf("no rejection reported for events %v", wantReasons)
	}
	evs := h.events(topic)
	if len(evs) != 1 || evs[0]["type"] != "ok1" {
		t.Fatalf("topic holds %v, want only ok1", evs)
	}
	var raws []json.RawMessage
	if err := json.Unmarshal([]byte(body), &raws); err != nil {
		t.Fatal(err)
	}
	letters := h.events(dlqTopic)
	if len(letters) != 5 {
		t.Fatalf("%d dead letters, want 5", len(letters))
	}
	for _, l := range letters {
		payload, _ := json.Marshal(l["payload"])
		found := false
		for i, raw := range raws {
			var want any
			_ = json.Unmarshal(raw, &want)
			w, _ := json.Marshal(want)
			if bytes.Equal(w, payload) && i != 0 {
				found = true
				if !strings.Contains(l["reason"].(string), strings.SplitN(reasonOf(res, i), ":", 2)[0]) {
					t.Errorf("dead letter reason %v for event %d", l["reason"], i)
				}
			}
		}
		if !found {
			t.Errorf("dead letter payload %s is not one of the rejected events", payload)
		}
		if l["ip"] != "127.0.0.1" || l["schema"] != "click" {
			t.Errorf("dead letter envelope %v", l)
		}
		if _, err := time.Parse(time.RFC3339Nano, fmt.Sprint(l["received_at"])); err != nil {
			t.Errorf("received_at %v: %v", l["received_at"], err)
		}
	}
	// Every event rejected: 400, still in the DLQ.
	resp, res = h.post("/v1/events", "application/json", `[{"nope":1}]`)
	if resp.StatusCode != http.StatusBadRequest || res.Rejected != 1 {
		t.Fatalf("all rejected: %d %+v", resp.StatusCode, res)
	}
	if n := h.endOffset(dlqTopic); n != 6 {
		t.Fatalf("%d dead letters, want 6", n)
	}
}

func reasonOf(res result, i int) string {
	for _, r := range res.Errors {
		if r.Index == i {
			return r.Reason
		}
	}
	return ""
}

func TestDoNotTrack(t *testing.T) {
	h := newHarness(t, Config{HonorDoNotTrack: true}, ship.Config{})
	resp, b := h.do(http.MethodPost, "/v1/events", "application/json", `{"type":"x"}`, map[string]string{"DNT": "1"})
	if resp.StatusCode != http.StatusOK || !strings.Contains(b, `"dropped":1`) {
		t.Fatalf("status %d %s", resp.StatusCode, b)
	}
	if n := h.endOffset(topic); n != 0 {
		t.Fatalf("%d events kept despite DNT", n)
	}
}

// TestClientEventIDs: a client's event_id is kept when it is a UUID of any
// version and spelling, in lower-case canonical form; anything else (the
// nil and max UUIDs included) gets a new server UUIDv7, counted in
// millrace_beacon_event_ids_made_total. The pixel takes the id as eid.
func TestClientEventIDs(t *testing.T) {
	const v7 = "0190f3c2-7b1e-7abc-8def-0123456789ab"
	const v4 = "f47ac10b-58cc-4372-a567-0e02b2c3d479"
	made := "" // the server makes a UUIDv7
	cases := []struct{ name, sent, want string }{
		{"v7", `"` + v7 + `"`, v7},
		{"v4", `"` + v4 + `"`, v4},
		{"upper case", `"` + strings.ToUpper(v7) + `"`, v7},
		{"braces", `"{` + v7 + `}"`, v7},
		{"urn", `"urn:uuid:` + v4 + `"`, v4},
		{"32 hex", `"` + strings.ReplaceAll(v4, "-", "") + `"`, v4},
		{"nil uuid", `"00000000-0000-0000-0000-000000000000"`, made},
		{"max uuid", `"ffffffff-ffff-ffff-ffff-ffffffffffff"`, made},
		{"not a uuid", `"not-a-uuid"`, made},
		{"space around", `" ` + v7 + `"`, made},
		{"one digit short", `"` + v7[:35] + `"`, made},
		{"empty", `""`, made},
		{"null", `null`, made},
	}
	h := newHarness(t, Config{}, ship.Config{})
	var body []string
	for _, c := range cases {
		body = append(body, `{"type":"`+c.name+`","event_id":`+c.sent+`}`)
	}
	body = append(body, `{"type":"missing"}`)
	if resp, res := h.post("/v1/events", "application/json", "["+strings.Join(body, ",")+"]"); resp.StatusCode != http.StatusOK || res.Accepted != len(body) {
		t.Fatalf("%d %+v", resp.StatusCode, res)
	}
	cases = append(cases, struct{ name, sent, want string }{"missing", "", made})

	pixel := []struct{ name, query, want string }{
		{"pixel eid", "eid=" + strings.ToUpper(v4), v4},
		{"pixel eid over event_id", "eid=" + v4 + "&event_id=" + v7, v4},
		{"pixel event_id", "event_id=" + v7, v7},
		{"pixel bad eid", "eid=123&event_id=" + v7, made},
		{"pixel none", "", made},
	}
	for _, p := range pixel {
		q := url.Values{"type": {p.name}}.Encode()
		if p.query != "" {
			q += "&" + p.query
		}
		if resp, _ := h.do(http.MethodGet, "/b.gif?"+q, "", "", nil); resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: status %d", p.name, resp.StatusCode)
		}
		cases = append(cases, struct{ name, sent, want string }{p.name, p.query, p.want})
	}

	evs := byType(h.events(topic))
	var madeCount int
	for _, c := range cases {
		e := evs[c.name]
		if e == nil {
			t.Errorf("%s: event missing", c.name)
			continue
		}
		if c.want == made {
			madeCount++
			checkServerFields(t, e) // a fresh UUIDv7
			if props, _ := e["properties"].(map[string]any); props["eid"] != nil {
				t.Errorf("%s: eid left in properties as %v", c.name, props["eid"])
			}
			continue
		}
		if e["event_id"] != c.want {
			t.Errorf("%s: sent %s, stored %v, want %s", c.name, c.sent, e["event_id"], c.want)
		}
	}
	if got := testutil.ToFloat64(h.server.metrics.madeIDs); got != float64(madeCount) {
		t.Errorf("event_ids_made_total %v, want %d", got, madeCount)
	}
}

// TestEventIDsMadeAreUnique: server-made ids never repeat, even within one
// millisecond, or the sink would drop distinct events as repeats.
func TestEventIDsMadeAreUnique(t *testing.T) {
	seen := make(map[string]bool)
	for range 10000 {
		id, made, err := eventID("")
		if err != nil || !made {
			t.Fatalf("eventID: %q %v %v", id, made, err)
		}
		if seen[id] {
			t.Fatalf("id %s made twice", id)
		}
		seen[id] = true
	}
}
