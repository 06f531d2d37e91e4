package registry

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestDeleteVersion: soft first, then permanent (Confluent: 40406 for a
// second soft delete, 40407 for a permanent one of a live version).
func TestDeleteVersion(t *testing.T) {
	t.Parallel()
	r := newRegistry(t, nil, nil)
	r.want(t, "POST", "/subjects/s/versions", schemaBody(schemaA), 200, `{"id":1}`)
	r.want(t, "POST", "/subjects/s/versions", schemaBody(schemaB), 200, `{"id":2}`)
	r.wantError(t, "DELETE", "/subjects/s/versions/1?permanent=true", "", 404, codeVersionNotSoftDeleted)
	r.want(t, "DELETE", "/subjects/s/versions/1", "", 200, `1`)
	r.wantError(t, "DELETE", "/subjects/s/versions/1", "", 404, codeVersionSoftDeleted)
	r.wantError(t, "GET", "/subjects/s/versions/1", "", 404, codeVersionNotFound)
	r.want(t, "GET", "/subjects/s/versions/1?deleted=true", "", 200, `{"subject":"s","version":1,"id":1,"schema":`+quote(schemaA)+`}`)
	r.want(t, "GET", "/subjects/s/versions", "", 200, `[2]`)
	r.want(t, "GET", "/subjects/s/versions?deleted=true", "", 200, `[1,2]`)
	// A soft-deleted version's ID is still served (consumers of old
	// records need it).
	r.want(t, "GET", "/schemas/ids/1", "", 200, "")
	r.want(t, "GET", "/schemas/ids/1/subjects", "", 200, `[]`)
	r.want(t, "GET", "/schemas/ids/1/subjects?deleted=true", "", 200, `["s"]`)
	r.want(t, "DELETE", "/subjects/s/versions/latest", "", 200, `2`)
	r.wantError(t, "GET", "/subjects/s/versions/latest", "", 404, codeSubjectNotFound)
	r.want(t, "DELETE", "/subjects/s/versions/1?permanent=true", "", 200, `1`)
	r.wantError(t, "GET", "/schemas/ids/1", "", 404, codeSchemaNotFound)
	r.wantError(t, "DELETE", "/subjects/s/versions/1?permanent=true", "", 404, codeVersionNotFound)
	// Registering again: a new version after the highest one still held
	// (2, soft-deleted); the schema keeps its ID, as the ID is its own.
	r.want(t, "POST", "/subjects/s/versions", schemaBody(schemaA), 200, `{"id":1}`)
	r.want(t, "GET", "/subjects/s/versions?deleted=true", "", 200, `[2,3]`)
}

// TestDeleteSubject: soft, then permanent (40405 for permanent first,
// 40404 for a second soft delete); a permanently deleted subject is gone,
// and its IDs are not given to other schemas.
func TestDeleteSubject(t *testing.T) {
	t.Parallel()
	r := newRegistry(t, nil, nil)
	r.want(t, "POST", "/subjects/s/versions", schemaBody(schemaA), 200, `{"id":1}`)
	r.want(t, "POST", "/subjects/s/versions", schemaBody(schemaB), 200, `{"id":2}`)
	r.want(t, "POST", "/subjects/t/versions", schemaBody(schemaA), 200, `{"id":1}`)
	r.wantError(t, "DELETE", "/subjects/nobody", "", 404, codeSubjectNotFound)
	r.wantError(t, "DELETE", "/subjects/s?permanent=true", "", 404, codeSubjectNotSoftDeleted)
	r.want(t, "DELETE", "/subjects/s", "", 200, `[1,2]`)
	r.wantError(t, "DELETE", "/subjects/s", "", 404, codeSubjectSoftDeleted)
	r.wantError(t, "GET", "/subjects/s/versions", "", 404, codeSubjectNotFound)
	r.want(t, "GET", "/subjects", "", 200, `["t"]`)
	r.want(t, "GET", "/subjects?deleted=true", "", 200, `["s","t"]`)
	r.want(t, "GET", "/subjects?deletedOnly=true", "", 200, `["s"]`)
	r.want(t, "GET", "/schemas?deleted=true&subjectPrefix=s", "", 200, "")
	r.want(t, "DELETE", "/subjects/s?permanent=true", "", 200, `[1,2]`)
	r.want(t, "GET", "/subjects?deleted=true", "", 200, `["t"]`)
	r.wantError(t, "GET", "/schemas/ids/2", "", 404, codeSchemaNotFound)
	r.want(t, "GET", "/schemas/ids/1/versions", "", 200, `[{"subject":"t","version":1}]`)
	// ID 2 is never given out again.
	r.want(t, "POST", "/subjects/s/versions", schemaBody(schemaC), 200, `{"id":3}`)
	r.want(t, "GET", "/subjects/s/versions", "", 200, `[1]`)
}

// TestReferences: references resolve through the view (transitively, by
// name), referencedby answers the referrers' IDs, and a referenced
// version cannot be deleted (42206).
func TestReferences(t *testing.T) {
	t.Parallel()
	r := newRegistry(t, nil, nil)
	r.want(t, "POST", "/subjects/base/versions", schemaBody(schemaA), 200, `{"id":1}`)
	mid := `{"fields":[{"name":"m"}],"uses":["Base"]}`
	r.want(t, "POST", "/subjects/mid/versions", schemaBody(mid, `"references":[{"name":"Base","subject":"base","version":1}]`), 200, `{"id":2}`)
	// top names only Mid; Base comes in through mid's references.
	top := `{"fields":[{"name":"t"}],"uses":["Mid","Base"]}`
	r.want(t, "POST", "/subjects/top/versions", schemaBody(top, `"references":[{"name":"Mid","subject":"mid","version":1}]`), 200, `{"id":3}`)
	r.want(t, "GET", "/schemas/ids/3", "", 200, `{"references":[{"name":"Mid","subject":"mid","version":1}],"schema":`+quote(top)+`}`)
	r.want(t, "GET", "/subjects/base/versions/1/referencedby", "", 200, `[2]`)
	r.want(t, "GET", "/subjects/mid/versions/latest/referencedby", "", 200, `[3]`)
	r.want(t, "GET", "/subjects/top/versions/1/referencedby", "", 200, `[]`)
	// The same text without its references is another schema.
	r.wantError(t, "POST", "/subjects/mid/versions", schemaBody(mid), 422, codeInvalidSchema)

	r.wantError(t, "DELETE", "/subjects/base/versions/1", "", 422, codeReferenceExists)
	r.wantError(t, "DELETE", "/subjects/base", "", 422, codeReferenceExists)
	r.want(t, "DELETE", "/subjects/top", "", 200, `[1]`)
	r.want(t, "DELETE", "/subjects/mid/versions/1", "", 200, `1`)
	r.want(t, "GET", "/subjects/base/versions/1/referencedby", "", 200, `[]`)
	r.want(t, "DELETE", "/subjects/base", "", 200, `[1]`)
	// A soft-deleted referrer still needs base to be parsed: base cannot
	// go for good before it.
	r.wantError(t, "DELETE", "/subjects/base?permanent=true", "", 422, codeReferenceExists)
	r.want(t, "DELETE", "/subjects/top?permanent=true", "", 200, `[1]`)
	r.want(t, "DELETE", "/subjects/mid?permanent=true", "", 200, `[1]`)
	r.want(t, "DELETE", "/subjects/base?permanent=true", "", 200, `[1]`)
}

// TestReferenceCycleAndBounds: a cycle (which only a damaged or
// hand-written log can hold) and references past the limits are refused
// with 42201 and the reason.
func TestReferenceCycleAndBounds(t *testing.T) {
	t.Parallel()
	log := NewMemoryLog()
	a := `{"fields":[],"uses":["B"]}`
	b := `{"fields":[],"uses":["A"]}`
	big := `{"fields":[{"name":"` + strings.Repeat("x", 600) + `"}]}`
	_, err := log.Append(context.Background(), []Record{
		schemaRecord(schemaValue{Subject: "a", Version: 1, ID: 1, Schema: a, References: []Reference{{"B", "b", 1}}}),
		schemaRecord(schemaValue{Subject: "b", Version: 1, ID: 2, Schema: b, References: []Reference{{"A", "a", 1}}}),
		schemaRecord(schemaValue{Subject: "big1", Version: 1, ID: 3, Schema: big}),
		schemaRecord(schemaValue{Subject: "big2", Version: 1, ID: 4, Schema: big + " "}),
	})
	if err != nil {
		t.Fatal(err)
	}
	r := newRegistry(t, log, func(c *Config) { c.Limits.MaxBytes = 1000 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.srv.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	r.want(t, "GET", "/subjects", "", 200, `["a","b","big1","big2"]`)
	msg := r.wantError(t, "POST", "/subjects/c/versions", schemaBody(`{"fields":[],"uses":["A","B"]}`, `"references":[{"name":"A","subject":"a","version":1}]`), 422, codeInvalidSchema)
	if !strings.Contains(msg, "cycle") {
		t.Errorf("message %q does not name the cycle", msg)
	}
	msg = r.wantError(t, "POST", "/subjects/c/versions", schemaBody(`{"fields":[],"uses":["X","Y"]}`,
		`"references":[{"name":"X","subject":"big1","version":1},{"name":"Y","subject":"big2","version":1}]`), 422, codeInvalidSchema)
	if !strings.Contains(msg, "1000 bytes") {
		t.Errorf("message %q does not name the byte limit", msg)
	}
	msg = r.wantError(t, "POST", "/subjects/c/versions", schemaBody(`{"fields":[],"uses":["X"]}`,
		`"references":[{"name":"X","subject":"big1","version":1},{"name":"X","subject":"big2","version":1}]`), 422, codeInvalidSchema)
	if !strings.Contains(msg, "two different") {
		t.Errorf("message %q does not name the clash", msg)
	}
}
