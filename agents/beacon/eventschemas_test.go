package beacon

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"millrace/agents/ship"
	"millrace/schemas/format"
	"millrace/schemas/srclient"
	"millrace/schemas/srclient/srtest"
)

// A JSON Schema for "click" events: a url and a positive x, no other
// properties than the click schema's.
const (
	clickSchemaV1 = `{"type":"object","required":["url"],"properties":{"type":{"type":"string"},"url":{"type":"string"},"x":{"type":"integer","minimum":0}}}`
	// Version 2 no longer requires url: BACKWARD compatible, as the
	// registry's default level wants.
	clickSchemaV2 = `{"type":"object","properties":{"type":{"type":"string"},"url":{"type":"string"},"x":{"type":"integer","minimum":0}}}`
)

func register(t *testing.T, url, subject, text string) {
	t.Helper()
	c, err := srclient.New(srclient.Config{URLs: []string{url}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Register(context.Background(), subject, srclient.Registration{Text: text, Type: format.JSON}); err != nil {
		t.Fatal(err)
	}
}

// TestEventsValidatedAgainstRegistrySchemas: events of a type that
// Config.Schemas maps to a subject must match its JSON Schema: a match is
// accepted, a mismatch rejected to the dead-letter topic with the
// validation's reason (400 when every event of the request is), on the
// JSON and the pixel routes; other types are not checked. A new version
// applies once Refresh has passed.
func TestEventsValidatedAgainstRegistrySchemas(t *testing.T) {
	reg := srtest.Start(t)
	register(t, reg.URL, "clicks-value", clickSchemaV1)
	h := newHarness(t, Config{
		Schemas:        map[string]string{"click": "clicks-value"},
		SchemaRegistry: srclient.Config{URLs: []string{reg.URL}, Refresh: time.Nanosecond},
	}, ship.Config{})

	resp, res := h.post("/v1/events", "application/json",
		`[{"type":"click","url":"/a","x":1},{"type":"click","url":"/b","x":-1},{"type":"page_view"}]`)
	if resp.StatusCode != http.StatusOK || res.Accepted != 2 || res.Rejected != 1 || len(res.Errors) != 1 ||
		res.Errors[0].Index != 1 || !strings.Contains(res.Errors[0].Reason, "does not match clicks-value version 1") ||
		!strings.Contains(res.Errors[0].Reason, "/x") {
		t.Fatalf("mixed batch: %d %+v", resp.StatusCode, res)
	}
	resp, res = h.post("/v1/events", "application/json", `{"type":"click","x":1}`)
	if resp.StatusCode != http.StatusBadRequest || res.Rejected != 1 || !strings.Contains(res.Errors[0].Reason, "url") {
		t.Fatalf("one invalid event: %d %+v", resp.StatusCode, res)
	}
	q := url.Values{"type": {"click"}}
	if resp, _ := h.do(http.MethodGet, "/b.gif?"+q.Encode(), "", "", nil); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("pixel without url: status %d, want 400", resp.StatusCode)
	}
	if got := h.endOffset(dlqTopic); got != 3 {
		t.Errorf("%d dead letters, want 3", got)
	}

	// Under version 2 an event without url is accepted.
	register(t, reg.URL, "clicks-value", clickSchemaV2)
	if resp, res = h.post("/v1/events", "application/json", `{"type":"click","x":1}`); resp.StatusCode != http.StatusOK || res.Accepted != 1 {
		t.Fatalf("after version 2: %d %+v", resp.StatusCode, res)
	}
	resp, res = h.post("/v1/events", "application/json", `{"type":"click","x":-2}`)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(res.Errors[0].Reason, "version 2") {
		t.Fatalf("invalid under version 2: %d %+v", resp.StatusCode, res)
	}
}

// TestEventSchemaUnavailable: an event whose schema was never fetched,
// with the registry gone, is answered 503 with Retry-After and nothing is
// produced; a subject that holds no JSON Schema is a 500.
func TestEventSchemaUnavailable(t *testing.T) {
	reg := srtest.Start(t)
	register(t, reg.URL, "json-value", clickSchemaV1)
	avro, err := srclient.New(srclient.Config{URLs: []string{reg.URL}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := avro.Register(context.Background(), "avro-value", srclient.Registration{Text: `{"type":"record","name":"C","fields":[]}`}); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, Config{
		Schemas:        map[string]string{"click": "avro-value", "view": "json-value"},
		SchemaRegistry: srclient.Config{URLs: []string{reg.URL}},
	}, ship.Config{})
	if resp, res := h.post("/v1/events", "application/json", `{"type":"click","url":"/a"}`); resp.StatusCode != http.StatusInternalServerError ||
		!strings.Contains(res.Error, "JSON Schema only") {
		t.Errorf("Avro subject: %d %+v", resp.StatusCode, res)
	}
	reg.Close()
	resp, res := h.post("/v1/events", "application/json", `{"type":"view","url":"/a"}`)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !strings.Contains(res.Error, "schema registry") {
		t.Errorf("registry gone: %d %+v", resp.StatusCode, res)
	}
	if n := h.endOffset(topic) + h.endOffset(dlqTopic); n != 0 {
		t.Errorf("%d records produced, want none", n)
	}
}

func TestSchemasConfigValidate(t *testing.T) {
	t.Parallel()
	for _, c := range []Config{
		{Schemas: map[string]string{"click": ""}},
		{Schemas: map[string]string{"": "clicks-value"}},
		{Schemas: map[string]string{"click": "clicks-value"}, SchemaRegistry: srclient.Config{URLs: []string{"registry:8081"}}},
	} {
		if err := c.WithDefaults().Validate(); err == nil || !strings.Contains(err.Error(), "beacon: ") {
			t.Errorf("%+v: error %v", c.Schemas, err)
		}
	}
	if err := (Config{Schemas: map[string]string{"click": "clicks-value"}}).WithDefaults().Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
}
