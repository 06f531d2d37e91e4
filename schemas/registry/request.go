package registry

import (
	"fmt"

	"millrace/schemas/format"
)

// schemaRequest is the body of a registration, a lookup and a
// compatibility check. ID and Version are honoured in IMPORT mode only.
type schemaRequest struct {
	Schema     string      `json:"schema"`
	SchemaType string      `json:"schemaType"`
	References []Reference `json:"references"`
	ID         int         `json:"id"`
	Version    int         `json:"version"`
}

// versionAnswer is one subject version, as GET .../versions/{v}, the
// lookup and GET /schemas answer it. schemaType is left out for AVRO, as
// Confluent does.
type versionAnswer struct {
	Subject    string      `json:"subject"`
	Version    int         `json:"version"`
	ID         int         `json:"id"`
	SchemaType string      `json:"schemaType,omitempty"`
	References []Reference `json:"references,omitempty"`
	Schema     string      `json:"schema"`
}

// schemaAnswer is GET /schemas/ids/{id}.
type schemaAnswer struct {
	SchemaType string      `json:"schemaType,omitempty"`
	References []Reference `json:"references,omitempty"`
	Schema     string      `json:"schema"`
}

func shownType(schemaType string) string {
	if schemaType == format.Avro {
		return ""
	}
	return schemaType
}

func (st *State) versionAnswer(subject string, v versionEntry) versionAnswer {
	e := st.schemas[v.id]
	return versionAnswer{Subject: subject, Version: v.version, ID: v.id, SchemaType: shownType(e.schemaType), References: e.refs, Schema: e.text}
}

// prepare checks a requested schema and parses it with its references;
// every refusal is 42201 with the reason.
func (st *State) prepare(req *schemaRequest) (format.Schema, error) {
	if req.SchemaType == "" {
		req.SchemaType = format.Avro
	}
	if req.Schema == "" {
		return nil, errInvalidSchema("the request has no schema text")
	}
	if len(req.Schema) > st.limits.MaxBytes {
		return nil, errInvalidSchema(fmt.Sprintf("the schema is %d bytes, more than the limit of %d", len(req.Schema), st.limits.MaxBytes))
	}
	if len(req.References) > maxReferences {
		return nil, errInvalidSchema(fmt.Sprintf("the schema has more than %d references", maxReferences))
	}
	for _, r := range req.References {
		if r.Version < 1 {
			return nil, errInvalidSchema(fmt.Sprintf("the reference %q needs a version of 1 or more", r.Name))
		}
	}
	if st.parse == nil {
		return nil, errInvalidSchema("this registry serves no schema types")
	}
	refs, err := st.resolve(req.References)
	if err != nil {
		return nil, errInvalidSchema(err.Error())
	}
	parsed, err := st.parse(req.SchemaType, req.Schema, refs)
	if err != nil {
		return nil, errInvalidSchema(err.Error())
	}
	return parsed, nil
}

// liveSubject returns subject's entry when it has a version (a live one
// unless deleted), else 40401.
func (st *State) liveSubject(subject string, deleted bool) (*subjectEntry, error) {
	sub, ok := st.subjects[subject]
	if !ok || len(sub.live(deleted)) == 0 {
		return nil, errSubjectNotFound(subject)
	}
	return sub, nil
}

// version returns a subject's version (latestVersion for the newest), live
// unless deleted: 40401 without the subject, 40402 without the version.
func (st *State) version(subject string, version int, deleted bool) (versionEntry, error) {
	sub, err := st.liveSubject(subject, deleted)
	if err != nil {
		return versionEntry{}, err
	}
	if version == latestVersion {
		live := sub.live(deleted)
		return live[len(live)-1], nil
	}
	i, ok := sub.find(version)
	if !ok || (sub.versions[i].deleted && !deleted) {
		return versionEntry{}, errVersionNotFound(subject, version)
	}
	return sub.versions[i], nil
}

// parsedLive returns the parsed schemas of a subject's live versions,
// oldest first, for a compatibility check. A version this registry could
// not parse (its type is not served here) is left out.
func (st *State) parsedLive(subject string) []format.Schema {
	sub, ok := st.subjects[subject]
	if !ok {
		return nil
	}
	var out []format.Schema
	for _, v := range sub.live(false) {
		if p := st.schemas[v.id].parsed; p != nil {
			out = append(out, p)
		}
	}
	return out
}
