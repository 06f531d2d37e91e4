package beacon

import (
	"encoding/json"
	"net/url"
	"testing"
	"time"

	"github.com/google/uuid"

	"millrace/schemas"
)

// FuzzSplitEvents: any body either fails with a request-level error or
// splits into at most limit elements, each a valid JSON value.
func FuzzSplitEvents(f *testing.F) {
	for _, s := range []string{`{"type":"x"}`, `[{"type":"a"},{"type":"b"}]`, `[1,"x",null]`, `[`, ` [ ] `, `{}{}`, `[{}]]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		raws, err := splitEvents(body, 3)
		if err != nil {
			return
		}
		if len(raws) > 3 {
			t.Fatalf("%d elements past the limit", len(raws))
		}
		for _, r := range raws {
			if !json.Valid(r) {
				t.Fatalf("element %q is not JSON", r)
			}
		}
	})
}

// FuzzPixelEvent: any query string gives a JSON object the click schema
// either accepts or rejects with a typed error (never malformed JSON).
func FuzzPixelEvent(f *testing.F) {
	for _, s := range []string{"type=page_view&url=x", "ts=123&properties=%7B%22a%22%3A1%7D", "properties=%7B", "%ff=%fe&type=%00",
		"eid=0190f3c2-7b1e-7abc-8def-0123456789ab&event_id=x", "eid=&event_id=&eid=1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, query string) {
		q, err := url.ParseQuery(query)
		if err != nil {
			return
		}
		raw := pixelEvent(q)
		if !json.Valid(raw) {
			t.Fatalf("pixel event %q is not JSON", raw)
		}
		if err := schemas.ValidateClick(raw); err != nil {
			var m map[string]any
			if json.Unmarshal(raw, &m) != nil {
				t.Fatalf("pixel event %q is not an object", raw)
			}
		}
	})
}

// FuzzWithDefaults: a JSON object stays a JSON object with ts and source.
func FuzzWithDefaults(f *testing.F) {
	for _, s := range []string{`{}`, `{"name":"a"}`, ` { } `, `[1]`, `{"ts":null}`} {
		f.Add([]byte(s))
	}
	ts := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, raw []byte) {
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil {
			return
		}
		out := withDefaults(raw, ts, "src")
		var got map[string]json.RawMessage
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("withDefaults(%q) = %q: %v", raw, out, err)
		}
		if _, ok := got["ts"]; !ok {
			t.Fatalf("withDefaults(%q) = %q lacks ts", raw, out)
		}
	})
}

// FuzzEventID: the id kept is the client's UUID in canonical form, anything
// else gets a fresh UUIDv7, and a kept id is kept again unchanged.
func FuzzEventID(f *testing.F) {
	for _, s := range []string{"", "0190f3c2-7b1e-7abc-8def-0123456789ab", "{0190F3C2-7B1E-7ABC-8DEF-0123456789AB}",
		"urn:uuid:f47ac10b-58cc-4372-a567-0e02b2c3d479", "00000000-0000-0000-0000-000000000000", "not-a-uuid"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, client string) {
		id, made, err := eventID(client)
		if err != nil {
			t.Fatal(err)
		}
		u, err := uuid.Parse(id)
		if err != nil || u.String() != id {
			t.Fatalf("eventID(%q) = %q: not a canonical UUID", client, id)
		}
		if made {
			if u.Version() != 7 {
				t.Fatalf("made id %s is not a UUIDv7", id)
			}
			return
		}
		if c, err := uuid.Parse(client); err != nil || c != u || u == uuid.Nil || u == uuid.Max {
			t.Fatalf("eventID(%q) kept %s", client, id)
		}
		if again, made, _ := eventID(id); made || again != id {
			t.Fatalf("eventID(%q) = %q, %v: a kept id must stay", id, again, made)
		}
	})
}
