package registry

import (
	"net/http"
	"strings"
	"testing"
)

// Toy schemas: b adds a field with a default (BACKWARD-compatible with a),
// c adds one without (incompatible).
const (
	schemaA       = `{"fields":[{"name":"a"}]}`
	schemaASpaced = `{ "fields": [ { "name": "a" } ] }`
	schemaB       = `{"fields":[{"name":"a"},{"name":"b","default":1}]}`
	schemaC       = `{"fields":[{"name":"a"},{"name":"c"}]}`
)

func TestRootAndTypes(t *testing.T) {
	t.Parallel()
	r := newRegistry(t, nil, nil)
	r.want(t, "GET", "/", "", 200, `{}`)
	r.want(t, "GET", "/schemas/types", "", 200, `["AVRO","JSON"]`)
	r.wantError(t, "GET", "/nothing/here", "", 404, 404)
	r.wantError(t, "PATCH", "/subjects", "", 405, 405)
}

// TestRegisterAndRead follows Confluent's register rules: the answer is
// {"id":N}; registering a schema already live under the subject answers
// its ID without a new version; the same schema (by canonical form) under
// another subject keeps its ID.
func TestRegisterAndRead(t *testing.T) {
	t.Parallel()
	r := newRegistry(t, nil, nil)
	r.want(t, "POST", "/subjects/orders-value/versions", schemaBody(schemaA), 200, `{"id":1}`)
	r.want(t, "POST", "/subjects/orders-value/versions", schemaBody(schemaASpaced), 200, `{"id":1}`)
	r.want(t, "POST", "/subjects/audit-value/versions", schemaBody(schemaA), 200, `{"id":1}`)
	r.want(t, "POST", "/subjects/orders-value/versions", schemaBody(schemaB), 200, `{"id":2}`)
	// The same text as another type is another schema.
	r.want(t, "POST", "/subjects/events-value/versions", schemaBody(schemaA, `"schemaType":"JSON"`), 200, `{"id":3}`)

	r.want(t, "GET", "/subjects", "", 200, `["audit-value","events-value","orders-value"]`)
	r.want(t, "GET", "/subjects?subjectPrefix=ord", "", 200, `["orders-value"]`)
	r.want(t, "GET", "/subjects/orders-value/versions", "", 200, `[1,2]`)
	r.want(t, "GET", "/subjects/orders-value/versions/1", "", 200,
		`{"subject":"orders-value","version":1,"id":1,"schema":`+quote(schemaA)+`}`)
	latest := `{"subject":"orders-value","version":2,"id":2,"schema":` + quote(schemaB) + `}`
	r.want(t, "GET", "/subjects/orders-value/versions/latest", "", 200, latest)
	r.want(t, "GET", "/subjects/orders-value/versions/-1", "", 200, latest)
	if _, got := r.do(t, "GET", "/subjects/orders-value/versions/2/schema", ""); got != schemaB {
		t.Errorf("raw schema of version 2: %s", got)
	}

	r.want(t, "GET", "/schemas/ids/1", "", 200, `{"schema":`+quote(schemaA)+`}`)
	r.want(t, "GET", "/schemas/ids/3?subject=events-value", "", 200, `{"schemaType":"JSON","schema":`+quote(schemaA)+`}`)
	r.want(t, "GET", "/subjects/events-value/versions/1", "", 200, `{"subject":"events-value","version":1,"id":3,"schemaType":"JSON","schema":`+quote(schemaA)+`}`)
	if _, got := r.do(t, "GET", "/schemas/ids/1/schema", ""); got != schemaA {
		t.Errorf("raw schema of id 1: %s", got)
	}
	r.want(t, "GET", "/schemas/ids/1/subjects", "", 200, `["audit-value","orders-value"]`)
	r.want(t, "GET", "/schemas/ids/1/versions", "", 200, `[{"subject":"audit-value","version":1},{"subject":"orders-value","version":1}]`)
	r.want(t, "GET", "/schemas?subjectPrefix=orders&latestOnly=true", "", 200, `[`+latest+`]`)
	r.want(t, "GET", "/schemas", "", 200, `[
		{"subject":"audit-value","version":1,"id":1,"schema":`+quote(schemaA)+`},
		{"subject":"events-value","version":1,"id":3,"schemaType":"JSON","schema":`+quote(schemaA)+`},
		{"subject":"orders-value","version":1,"id":1,"schema":`+quote(schemaA)+`},
		`+latest+`]`)

	// Lookup: POST /subjects/{s} answers the version holding the schema.
	r.want(t, "POST", "/subjects/orders-value", schemaBody(schemaASpaced), 200,
		`{"subject":"orders-value","version":1,"id":1,"schema":`+quote(schemaA)+`}`)
	r.wantError(t, "POST", "/subjects/orders-value", schemaBody(schemaC), 404, codeSchemaNotFound)
	r.wantError(t, "POST", "/subjects/nobody", schemaBody(schemaA), 404, codeSubjectNotFound)
}

// TestNormalize: with ?normalize=true a registration or lookup matches a
// schema that differs only in what normalizing ignores (the toy type's
// field order).
func TestNormalize(t *testing.T) {
	t.Parallel()
	r := newRegistry(t, nil, nil)
	ab := `{"fields":[{"name":"a"},{"name":"b","default":1}]}`
	ba := `{"fields":[{"name":"b","default":1},{"name":"a"}]}`
	r.want(t, "POST", "/subjects/s/versions", schemaBody(ab), 200, `{"id":1}`)
	r.wantError(t, "POST", "/subjects/s", schemaBody(ba), 404, codeSchemaNotFound)
	r.want(t, "POST", "/subjects/s?normalize=true", schemaBody(ba), 200, `{"subject":"s","version":1,"id":1,"schema":`+quote(ab)+`}`)
	r.want(t, "POST", "/subjects/s/versions?normalize=true", schemaBody(ba), 200, `{"id":1}`)
	r.want(t, "GET", "/subjects/s/versions", "", 200, `[1]`)
}

// TestRequestErrors: Confluent's error codes for what a client gets wrong.
func TestRequestErrors(t *testing.T) {
	t.Parallel()
	r := newRegistry(t, nil, nil)
	r.want(t, "POST", "/subjects/s/versions", schemaBody(schemaA), 200, `{"id":1}`)
	for _, c := range []struct {
		method, path, body string
		status, code       int
	}{
		{"GET", "/subjects/nobody/versions", "", 404, codeSubjectNotFound},
		{"GET", "/subjects/nobody/versions/1", "", 404, codeSubjectNotFound},
		{"GET", "/subjects/s/versions/9", "", 404, codeVersionNotFound},
		{"GET", "/subjects/s/versions/9/schema", "", 404, codeVersionNotFound},
		{"GET", "/subjects/s/versions/abc", "", 422, codeInvalidVersion},
		{"GET", "/subjects/s/versions/0", "", 422, codeInvalidVersion},
		{"GET", "/subjects/s/versions/99999999999999999999", "", 422, codeInvalidVersion},
		{"DELETE", "/subjects/s/versions/-2", "", 422, codeInvalidVersion},
		{"GET", "/schemas/ids/9", "", 404, codeSchemaNotFound},
		{"GET", "/schemas/ids/-1", "", 404, codeSchemaNotFound},
		{"GET", "/schemas/ids/x/subjects", "", 404, codeSchemaNotFound},
		{"GET", "/schemas/ids/9/versions", "", 404, codeSchemaNotFound},
		{"POST", "/subjects/s/versions", schemaBody(`{"fields":[{"name":"a"},{"name":"a"}]}`), 422, codeInvalidSchema},
		{"POST", "/subjects/s/versions", schemaBody(`not json`), 422, codeInvalidSchema},
		{"POST", "/subjects/s/versions", schemaBody(schemaB, `"schemaType":"XML"`), 422, codeInvalidSchema},
		{"POST", "/subjects/s/versions", `{"schema":`, 422, codeInvalidSchema},
		{"POST", "/subjects/s/versions", `[]`, 422, codeInvalidSchema},
		{"POST", "/subjects/s/versions", `{}`, 422, codeInvalidSchema},
		{"POST", "/subjects/s/versions", schemaBody(schemaB, `"id":5`), 422, codeOperationNotPermitted},
		{"POST", "/subjects/s/versions", schemaBody(schemaB, `"references":[{"name":"X","subject":"nobody","version":1}]`), 422, codeInvalidSchema},
		{"POST", "/subjects/s/versions", schemaBody(schemaB, `"references":[{"name":"X","subject":"s","version":0}]`), 422, codeInvalidSchema},
		{"POST", "/subjects/%01/versions", schemaBody(schemaB), 422, codeInvalidSubject},
		// A name longer than the log's keys may hold (maxSubjectBytes).
		{"POST", "/subjects/" + strings.Repeat("s", maxSubjectBytes+1) + "/versions", schemaBody(schemaB), 422, codeInvalidSubject},
		{"PUT", "/config/" + strings.Repeat("s", maxSubjectBytes+1), `{"compatibility":"NONE"}`, 422, codeInvalidSubject},
		{"PUT", "/mode/" + strings.Repeat("s", maxSubjectBytes+1), `{"mode":"READONLY"}`, 422, codeInvalidSubject},
		{"POST", "/subjects/s/versions", schemaBody(schemaC), 409, codeIncompatible},
	} {
		r.wantError(t, c.method, c.path, c.body, c.status, c.code)
	}
	// The reason of a parse error reaches the client.
	if msg := r.wantError(t, "POST", "/subjects/s/versions", schemaBody(`{"fields":[{"name":"a"},{"name":"a"}]}`), 422, codeInvalidSchema); !strings.Contains(msg, "repeated") {
		t.Errorf("invalid schema message %q does not say why", msg)
	}
	// Nothing refused was written.
	r.want(t, "GET", "/subjects/s/versions", "", 200, `[1]`)
}

// TestContentTypes: Confluent's content types and none are taken; the
// answer is always application/vnd.schemaregistry.v1+json.
func TestContentTypes(t *testing.T) {
	t.Parallel()
	r := newRegistry(t, nil, nil)
	for i, ct := range []string{contentTypeV1, "application/vnd.schemaregistry+json", "application/json; charset=utf-8", "application/octet-stream"} {
		status, got := r.do(t, "POST", "/subjects/s"+string(rune('a'+i))+"/versions", schemaBody(schemaA), "Content-Type", ct)
		if status != 200 || compact(t, got) != `{"id":1}` {
			t.Errorf("content type %s: %d %s", ct, status, got)
		}
	}
	req, _ := http.NewRequest("POST", r.http.URL+"/subjects/none/versions", strings.NewReader(schemaBody(schemaA)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != contentTypeV1 {
		t.Errorf("no content type: %d, answered as %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	// A GET has no body: its content type does not matter.
	if status, _ := r.do(t, "GET", "/subjects", "", "Content-Type", "text/plain"); status != 200 {
		t.Errorf("GET with a text/plain content type: %d", status)
	}
	status, _ := r.do(t, "POST", "/subjects/s/versions", schemaBody(schemaA), "Content-Type", "text/xml")
	if status != http.StatusUnsupportedMediaType {
		t.Errorf("text/xml: status %d, want 415", status)
	}
}

// TestBodyBounds: a body past the schema limit is refused 422 with the
// reason, not read whole and not a 500.
func TestBodyBounds(t *testing.T) {
	t.Parallel()
	r := newRegistry(t, nil, func(c *Config) { c.Limits.MaxBytes = 1000 })
	big := strings.Repeat(" ", 200<<10)
	if msg := r.wantError(t, "POST", "/subjects/s/versions", schemaBody(schemaA+big), 422, codeInvalidSchema); !strings.Contains(msg, "bytes") {
		t.Errorf("message %q does not name the limit", msg)
	}
	r.wantError(t, "POST", "/subjects/s/versions", schemaBody(schemaA+strings.Repeat(" ", 2000)), 422, codeInvalidSchema)
	r.want(t, "POST", "/subjects/s/versions", schemaBody(schemaA), 200, `{"id":1}`)
}
