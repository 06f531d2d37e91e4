package registry

import (
	"strings"
	"testing"
)

// TestCompatibilityLevels: the levels as Confluent defines them over the
// reader/writer check. BACKWARD: the new schema reads the latest;
// FORWARD: the latest reads the new one; FULL: both; _TRANSITIVE: against
// every live version; NONE: nothing.
func TestCompatibilityLevels(t *testing.T) {
	t.Parallel()
	empty := `{"fields":[]}`
	c := `{"fields":[{"name":"c"}]}`
	cd := `{"fields":[{"name":"c"},{"name":"d","default":0}]}`
	e := `{"fields":[{"name":"e","default":0}]}`
	for _, tc := range []struct {
		level      string
		candidate  string
		compatible bool
	}{
		// Reads the latest (c) but not version 1 (empty: c has no default).
		{LevelBackward, cd, true},
		{LevelBackwardTransitive, cd, false},
		// The latest (c) reads what cd writes; version 1 (empty) reads anything.
		{LevelForward, cd, true},
		{LevelForwardTransitive, cd, true},
		{LevelFull, cd, true},
		{LevelFullTransitive, cd, false},
		// e (with a default) reads c, but c cannot read what e writes.
		{LevelBackward, e, true},
		{LevelForward, e, false},
		{LevelFull, e, false},
		{LevelNone, `{"fields":[{"name":"z"}]}`, true},
	} {
		t.Run(tc.level+"/"+tc.candidate, func(t *testing.T) {
			t.Parallel()
			r := newRegistry(t, nil, nil)
			r.want(t, "PUT", "/config/s", `{"compatibility":"NONE"}`, 200, `{"compatibility":"NONE"}`)
			r.want(t, "POST", "/subjects/s/versions", schemaBody(empty), 200, `{"id":1}`)
			r.want(t, "POST", "/subjects/s/versions", schemaBody(c), 200, `{"id":2}`)
			r.want(t, "PUT", "/config/s", `{"compatibility":"`+tc.level+`"}`, 200, "")
			want := `{"is_compatible":` + map[bool]string{true: "true", false: "false"}[tc.compatible] + `}`
			r.want(t, "POST", "/compatibility/subjects/s/versions", schemaBody(tc.candidate), 200, want)
			if tc.compatible {
				r.want(t, "POST", "/subjects/s/versions", schemaBody(tc.candidate), 200, "")
			} else {
				r.wantError(t, "POST", "/subjects/s/versions", schemaBody(tc.candidate), 409, codeIncompatible)
			}
		})
	}
}

// TestCompatibilityEndpoint: against one version or all, ?verbose giving
// the messages, Confluent's errors for a missing subject or version.
func TestCompatibilityEndpoint(t *testing.T) {
	t.Parallel()
	r := newRegistry(t, nil, nil)
	r.want(t, "POST", "/subjects/s/versions", schemaBody(schemaA), 200, `{"id":1}`)
	r.want(t, "POST", "/compatibility/subjects/s/versions/latest", schemaBody(schemaB), 200, `{"is_compatible":true}`)
	r.want(t, "POST", "/compatibility/subjects/s/versions/1?verbose=true", schemaBody(schemaB), 200, `{"is_compatible":true,"messages":[]}`)
	got := r.want(t, "POST", "/compatibility/subjects/s/versions/latest?verbose=true", schemaBody(schemaC), 200, "")
	if !strings.Contains(got, `"is_compatible":false`) || !strings.Contains(got, "READER_FIELD_MISSING_DEFAULT_VALUE") {
		t.Errorf("verbose answer %s lacks the reason", got)
	}
	// A subject with no versions takes anything.
	r.want(t, "POST", "/compatibility/subjects/new/versions", schemaBody(schemaC), 200, `{"is_compatible":true}`)
	r.wantError(t, "POST", "/compatibility/subjects/new/versions/latest", schemaBody(schemaC), 404, codeSubjectNotFound)
	r.wantError(t, "POST", "/compatibility/subjects/s/versions/7", schemaBody(schemaC), 404, codeVersionNotFound)
	r.wantError(t, "POST", "/compatibility/subjects/s/versions/x", schemaBody(schemaC), 422, codeInvalidVersion)
	r.wantError(t, "POST", "/compatibility/subjects/s/versions/1", schemaBody("{"), 422, codeInvalidSchema)
}

// TestConfig: GET/PUT/DELETE /config and /config/{subject}, Confluent's
// shapes (GET answers compatibilityLevel, PUT compatibility).
func TestConfig(t *testing.T) {
	t.Parallel()
	r := newRegistry(t, nil, nil)
	r.want(t, "GET", "/config", "", 200, `{"compatibilityLevel":"BACKWARD"}`)
	r.want(t, "PUT", "/config", `{"compatibility":"FULL"}`, 200, `{"compatibility":"FULL"}`)
	r.want(t, "GET", "/config", "", 200, `{"compatibilityLevel":"FULL"}`)
	r.wantError(t, "GET", "/config/s", "", 404, codeSubjectCompatNotFound)
	r.want(t, "GET", "/config/s?defaultToGlobal=true", "", 200, `{"compatibilityLevel":"FULL"}`)
	r.wantError(t, "DELETE", "/config/s", "", 404, codeSubjectNotFound)
	r.want(t, "PUT", "/config/s", `{"compatibility":"none"}`, 200, `{"compatibility":"NONE"}`)
	r.want(t, "GET", "/config/s", "", 200, `{"compatibilityLevel":"NONE"}`)
	r.want(t, "DELETE", "/config/s", "", 200, `{"compatibilityLevel":"NONE"}`)
	r.wantError(t, "GET", "/config/s", "", 404, codeSubjectCompatNotFound)
	r.want(t, "DELETE", "/config", "", 200, `{"compatibilityLevel":"FULL"}`)
	r.want(t, "GET", "/config", "", 200, `{"compatibilityLevel":"BACKWARD"}`)
	r.wantError(t, "PUT", "/config", `{"compatibility":"SIDEWAYS"}`, 422, codeInvalidCompatibility)
	r.wantError(t, "PUT", "/config/s", `nope`, 422, codeInvalidCompatibility)
	// A subject with a version but no level of its own: 40408, not 40401.
	r.want(t, "POST", "/subjects/t/versions", schemaBody(schemaA), 200, `{"id":1}`)
	r.wantError(t, "DELETE", "/config/t", "", 404, codeSubjectCompatNotFound)
}

// TestMode: GET/PUT /mode and /mode/{subject}, DELETE /mode/{subject};
// READONLY refuses writes with 42205.
func TestMode(t *testing.T) {
	t.Parallel()
	r := newRegistry(t, nil, nil)
	r.want(t, "POST", "/subjects/s/versions", schemaBody(schemaA), 200, `{"id":1}`)
	r.want(t, "GET", "/mode", "", 200, `{"mode":"READWRITE"}`)
	r.wantError(t, "GET", "/mode/s", "", 404, codeSubjectModeNotFound)
	r.want(t, "GET", "/mode/s?defaultToGlobal=true", "", 200, `{"mode":"READWRITE"}`)
	r.want(t, "PUT", "/mode/s", `{"mode":"READONLY"}`, 200, `{"mode":"READONLY"}`)
	r.want(t, "GET", "/mode/s", "", 200, `{"mode":"READONLY"}`)
	r.wantError(t, "POST", "/subjects/s/versions", schemaBody(schemaB), 422, codeOperationNotPermitted)
	r.wantError(t, "DELETE", "/subjects/s/versions/1", "", 422, codeOperationNotPermitted)
	r.wantError(t, "DELETE", "/subjects/s", "", 422, codeOperationNotPermitted)
	// Reads and lookups go on; other subjects still take writes.
	r.want(t, "GET", "/subjects/s/versions/1", "", 200, "")
	r.want(t, "POST", "/subjects/t/versions", schemaBody(schemaA), 200, `{"id":1}`)
	r.want(t, "DELETE", "/mode/s", "", 200, `{"mode":"READONLY"}`)
	r.wantError(t, "DELETE", "/mode/s", "", 404, codeSubjectModeNotFound)
	r.want(t, "POST", "/subjects/s/versions", schemaBody(schemaB), 200, `{"id":2}`)
	r.want(t, "PUT", "/mode", `{"mode":"READONLY"}`, 200, `{"mode":"READONLY"}`)
	r.wantError(t, "POST", "/subjects/u/versions", schemaBody(schemaA), 422, codeOperationNotPermitted)
	r.wantError(t, "PUT", "/mode", `{"mode":"SOMETIMES"}`, 422, codeInvalidMode)
	r.wantError(t, "PUT", "/mode/s", `{}`, 422, codeInvalidMode)
}

// TestImportMode: IMPORT keeps the IDs and versions given, needs an ID,
// checks no compatibility, and can only be entered on an empty scope
// unless forced (Confluent's import rules).
func TestImportMode(t *testing.T) {
	t.Parallel()
	r := newRegistry(t, nil, nil)
	r.want(t, "POST", "/subjects/old/versions", schemaBody(schemaA), 200, `{"id":1}`)
	r.wantError(t, "PUT", "/mode", `{"mode":"IMPORT"}`, 422, codeOperationNotPermitted)
	r.wantError(t, "PUT", "/mode/old", `{"mode":"IMPORT"}`, 422, codeOperationNotPermitted)
	r.want(t, "PUT", "/mode/new", `{"mode":"IMPORT"}`, 200, `{"mode":"IMPORT"}`)

	r.want(t, "POST", "/subjects/new/versions", schemaBody(schemaC, `"id":100`, `"version":5`), 200, `{"id":100}`)
	r.want(t, "GET", "/subjects/new/versions/5", "", 200, `{"subject":"new","version":5,"id":100,"schema":`+quote(schemaC)+`}`)
	// No compatibility check in IMPORT: the incompatible one goes in.
	r.want(t, "POST", "/subjects/new/versions", schemaBody(schemaA, `"id":1`, `"version":6`), 200, `{"id":1}`)
	r.wantError(t, "POST", "/subjects/new/versions", schemaBody(schemaB), 422, codeOperationNotPermitted)
	// The same schema spelled differently under its own ID is taken.
	r.want(t, "POST", "/subjects/new/versions", schemaBody(schemaASpaced, `"id":1`, `"version":8`), 200, `{"id":1}`)
	r.wantError(t, "POST", "/subjects/new/versions", schemaBody(schemaB, `"id":100`), 422, codeOperationNotPermitted)
	r.wantError(t, "POST", "/subjects/new/versions", schemaBody(schemaA, `"id":7`), 422, codeIDDoesNotMatch)
	r.wantError(t, "POST", "/subjects/new/versions", schemaBody(schemaB, `"id":101`, `"version":5`), 422, codeOperationNotPermitted)
	r.wantError(t, "POST", "/subjects/new/versions", schemaBody(schemaB, `"id":2147483648`), 422, codeInvalidSchema)

	// Back to READWRITE: the next ID is past every imported one.
	r.want(t, "DELETE", "/mode/new", "", 200, `{"mode":"IMPORT"}`)
	r.wantError(t, "POST", "/subjects/old/versions", schemaBody(schemaB, `"id":200`), 422, codeOperationNotPermitted)
	r.want(t, "POST", "/subjects/old/versions", schemaBody(schemaB), 200, `{"id":101}`)
	r.want(t, "PUT", "/mode?force=true", `{"mode":"IMPORT"}`, 200, `{"mode":"IMPORT"}`)
}
