package registry

import (
	"fmt"
	"math"
	"net/http"
	"strings"
)

// GET /subjects: subject names, live ones unless ?deleted; only those with
// soft-deleted versions with ?deletedOnly.
func (s *Server) getSubjects(w http.ResponseWriter, r *http.Request) {
	s.readView(w, func(st *State) (any, error) {
		return st.subjectNames(r.URL.Query().Get("subjectPrefix"), queryBool(r, "deleted"), queryBool(r, "deletedOnly")), nil
	})
}

// GET /subjects/{subject}/versions: the version numbers.
func (s *Server) getVersions(w http.ResponseWriter, r *http.Request) {
	subject := r.PathValue("subject")
	s.readView(w, func(st *State) (any, error) {
		sub, err := st.liveSubject(subject, queryBool(r, "deleted"))
		if err != nil {
			return nil, err
		}
		versions := []int{}
		for _, v := range sub.live(queryBool(r, "deleted")) {
			versions = append(versions, v.version)
		}
		return versions, nil
	})
}

// GET /subjects/{subject}/versions/{version}.
func (s *Server) getVersion(w http.ResponseWriter, r *http.Request) {
	s.readVersion(w, r, func(st *State, subject string, v versionEntry) any {
		return st.versionAnswer(subject, v)
	})
}

// GET /subjects/{subject}/versions/{version}/schema: the text alone.
func (s *Server) getRawVersion(w http.ResponseWriter, r *http.Request) {
	s.readVersion(w, r, func(st *State, _ string, v versionEntry) any {
		return rawText(st.schemas[v.id].text)
	})
}

// GET /subjects/{subject}/versions/{version}/referencedby: the IDs of the
// live schemas referencing it.
func (s *Server) getReferencedBy(w http.ResponseWriter, r *http.Request) {
	s.readVersion(w, r, func(st *State, subject string, v versionEntry) any {
		return st.referencedBy(subject, v.version, false)
	})
}

func (s *Server) readVersion(w http.ResponseWriter, r *http.Request, answer func(*State, string, versionEntry) any) {
	subject := r.PathValue("subject")
	version, err := parseVersion(r.PathValue("version"))
	if err != nil {
		writeError(w, err)
		return
	}
	s.readView(w, func(st *State) (any, error) {
		v, err := st.version(subject, version, queryBool(r, "deleted"))
		if err != nil {
			return nil, err
		}
		return answer(st, subject, v), nil
	})
}

// POST /subjects/{subject}: is this schema registered under the subject,
// and as which version?
func (s *Server) lookupSchema(w http.ResponseWriter, r *http.Request) {
	subject := r.PathValue("subject")
	req, ok := s.readSchemaRequest(w, r)
	if !ok {
		return
	}
	deleted := queryBool(r, "deleted")
	s.readView(w, func(st *State) (any, error) {
		sub, err := st.liveSubject(subject, deleted)
		if err != nil {
			return nil, err
		}
		parsed, err := st.prepare(&req)
		if err != nil {
			return nil, err
		}
		id, ok := st.lookup(req.SchemaType, req.References, parsed, queryBool(r, "normalize"))
		if ok {
			for _, v := range sub.live(deleted) {
				if v.id == id {
					return st.versionAnswer(subject, v), nil
				}
			}
		}
		return nil, errSchemaNotFound()
	})
}

// POST /subjects/{subject}/versions: register a schema, answering its ID.
// A schema already live under the subject answers its ID and adds no
// version; one registered under another subject keeps its ID here.
func (s *Server) register(w http.ResponseWriter, r *http.Request) {
	subject := r.PathValue("subject")
	body, err := s.readBody(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	normalize := queryBool(r, "normalize")
	s.serveWrite(w, r, body, func(st *State) (change, error) {
		if err := validSubject(subject); err != nil {
			return change{}, err
		}
		var req schemaRequest
		if err := decodeBody(body, &req, codeInvalidSchema); err != nil {
			return change{}, err
		}
		return st.register(subject, req, normalize)
	})
}

type idAnswer struct {
	ID int `json:"id"`
}

func (st *State) register(subject string, req schemaRequest, normalize bool) (change, error) {
	mode := st.effectiveMode(subject)
	if mode == ModeReadOnly {
		return change{}, errReadOnly(subject)
	}
	if mode != ModeImport && (req.ID != 0 || req.Version != 0) {
		return change{}, errorf(codeOperationNotPermitted, "Subject '%s' is not in import mode; an id or version can be given only in IMPORT mode.", subject)
	}
	if mode == ModeImport && req.ID == 0 {
		// An import copies another registry: an ID made up here could
		// collide with one still to come.
		return change{}, errorf(codeOperationNotPermitted, "Subject '%s' is in import mode; a registration must give the schema's id.", subject)
	}
	if req.ID < 0 || req.Version < 0 || req.ID > math.MaxInt32 || req.Version > math.MaxInt32 {
		return change{}, errorf(codeInvalidSchema, "An imported id and version must be between 1 and 2^31-1; got id %d, version %d.", req.ID, req.Version)
	}
	parsed, err := st.prepare(&req)
	if err != nil {
		return change{}, err
	}
	sub := st.subjects[subject]
	existing, known := st.lookup(req.SchemaType, req.References, parsed, normalize)
	if known && req.ID != 0 && req.ID != existing {
		return change{}, errorf(codeIDDoesNotMatch, "Schema already registered with id %d instead of input id %d.", existing, req.ID)
	}
	if known && sub != nil {
		for _, v := range sub.live(false) {
			if v.id == existing && (req.Version == 0 || req.Version == v.version) {
				return change{answer: idAnswer{existing}}, nil
			}
		}
	}
	nextVersion := 1
	if sub != nil && len(sub.versions) > 0 {
		nextVersion = sub.versions[len(sub.versions)-1].version + 1
	}
	id, version := existing, nextVersion
	if !known {
		id = st.maxID + 1
	}
	if mode == ModeImport {
		if req.ID != 0 {
			// The ID is free, or already this schema's (by canonical form).
			if _, taken := st.schemas[req.ID]; taken && !known {
				return change{}, errorf(codeOperationNotPermitted, "Overwrite new schema with id %d is not permitted: the id is another schema's.", req.ID)
			}
			id = req.ID
		}
		if req.Version != 0 {
			if sub != nil {
				if _, taken := sub.find(req.Version); taken {
					return change{}, errorf(codeOperationNotPermitted, "Overwrite new schema with version %d of subject '%s' is not permitted.", req.Version, subject)
				}
			}
			version = req.Version
		}
	} else if messages := checkCompat(st.effectiveCompat(subject), parsed, st.parsedLive(subject)); len(messages) > 0 {
		return change{}, errorf(codeIncompatible, "Schema being registered is incompatible with an earlier schema for subject \"%s\", details: [%s]", subject, strings.Join(messages, ", "))
	}
	value := schemaValue{Subject: subject, Version: version, ID: id, SchemaType: shownType(req.SchemaType), Schema: req.Schema, References: req.References}
	if e, ok := st.schemas[id]; ok {
		// The same schema under another text (spacing, key order): the
		// record repeats the ID's text, so every view agrees on it.
		value.Schema, value.References = e.text, e.refs
	}
	return change{records: []Record{schemaRecord(value)}, answer: idAnswer{id}}, nil
}

// maxSubjectBytes bounds a subject name. Every record about a subject
// carries its name in the key, a compacted topic refuses keys over 64 KiB
// by default (millrace.compacted.max.key.bytes), and JSON may write a
// byte of the name as six (<, > and & as \u003c); Kafka's topic names,
// which subjects are usually made of, are at most 249 bytes.
const maxSubjectBytes = 8 << 10

// validSubject refuses subject names no client can mean: empty, holding
// control characters or too long for the log's keys (Confluent's 42208).
func validSubject(subject string) error {
	if len(subject) > maxSubjectBytes {
		return errorf(codeInvalidSubject, "The subject name is %d bytes, more than the limit of %d.", len(subject), maxSubjectBytes)
	}
	if subject == "" || strings.ContainsFunc(subject, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return errorf(codeInvalidSubject, "The subject %q is not a valid subject name.", subject)
	}
	return nil
}

// DELETE /subjects/{subject}: soft-delete every version, or with
// ?permanent=true remove the soft-deleted ones for good.
func (s *Server) deleteSubject(w http.ResponseWriter, r *http.Request) {
	subject := r.PathValue("subject")
	permanent := queryBool(r, "permanent")
	s.serveWrite(w, r, nil, func(st *State) (change, error) {
		if st.effectiveMode(subject) == ModeReadOnly {
			return change{}, errReadOnly(subject)
		}
		sub, err := st.liveSubject(subject, true)
		if err != nil {
			return change{}, err
		}
		live := sub.live(false)
		if !permanent && len(live) == 0 {
			return change{}, errorf(codeSubjectSoftDeleted, "Subject '%s' was soft deleted. Set permanent=true to delete permanently.", subject)
		}
		if permanent && len(live) > 0 {
			return change{}, errorf(codeSubjectNotSoftDeleted, "Subject '%s' was not deleted first before being permanently deleted; delete it without permanent=true first.", subject)
		}
		versions := []int{}
		for _, v := range sub.versions {
			if err := st.checkUnreferenced(subject, v.version, permanent, true); err != nil {
				return change{}, err
			}
			versions = append(versions, v.version)
		}
		if !permanent {
			return change{records: []Record{deleteSubjectRecord(subject, versions[len(versions)-1])}, answer: versions}, nil
		}
		var records []Record
		for _, v := range versions {
			records = append(records, Record{Key: schemaKey(subject, v)})
		}
		return change{records: records, answer: versions}, nil
	})
}

// DELETE /subjects/{subject}/versions/{version}: soft-delete one version,
// or with ?permanent=true remove a soft-deleted one for good.
func (s *Server) deleteVersion(w http.ResponseWriter, r *http.Request) {
	subject := r.PathValue("subject")
	permanent := queryBool(r, "permanent")
	version, err := parseVersion(r.PathValue("version"))
	if err != nil {
		writeError(w, err)
		return
	}
	s.serveWrite(w, r, nil, func(st *State) (change, error) {
		if st.effectiveMode(subject) == ModeReadOnly {
			return change{}, errReadOnly(subject)
		}
		// "latest" is the newest live version for a soft delete; a numbered
		// one is looked up soft-deleted too, to answer 40406 for it.
		v, err := st.version(subject, version, permanent || version != latestVersion)
		if err != nil {
			return change{}, err
		}
		if !permanent && v.deleted {
			return change{}, errorf(codeVersionSoftDeleted, "Subject '%s' Version %d was soft deleted. Set permanent=true to delete permanently.", subject, v.version)
		}
		if permanent && !v.deleted {
			return change{}, errorf(codeVersionNotSoftDeleted, "Subject '%s' Version %d was not deleted first before being permanently deleted; delete it without permanent=true first.", subject, v.version)
		}
		if err := st.checkUnreferenced(subject, v.version, permanent, false); err != nil {
			return change{}, err
		}
		if permanent {
			return change{records: []Record{{Key: schemaKey(subject, v.version)}}, answer: v.version}, nil
		}
		e := st.schemas[v.id]
		value := schemaValue{Subject: subject, Version: v.version, ID: v.id, SchemaType: shownType(e.schemaType), Schema: e.text, References: e.refs, Deleted: true}
		return change{records: []Record{schemaRecord(value)}, answer: v.version}, nil
	})
}

// checkUnreferenced refuses to delete a version other schemas reference
// (42206): live ones for a soft delete, any for a permanent one, which
// would leave a soft-deleted referrer that can no longer be parsed.
// References from the subject's own versions go with it on a subject
// delete and are not counted.
func (st *State) checkUnreferenced(subject string, version int, permanent, wholeSubject bool) error {
	for from := range st.referrers[subjectVersion{subject, version}] {
		if wholeSubject && from.subject == subject {
			continue
		}
		sub := st.subjects[from.subject]
		if sub == nil {
			continue
		}
		i, ok := sub.find(from.version)
		if !ok || (!permanent && sub.versions[i].deleted) {
			continue
		}
		return errorf(codeReferenceExists, "One or more references exist to the schema {subject=%s,version=%d}: %s", subject, version, fmt.Sprintf("%s version %d references it", from.subject, from.version))
	}
	return nil
}

// readSchemaRequest reads a request's body as a schema (register, lookup,
// compatibility), answering the error itself when it is not one.
func (s *Server) readSchemaRequest(w http.ResponseWriter, r *http.Request) (schemaRequest, bool) {
	var req schemaRequest
	body, err := s.readBody(w, r)
	if err == nil {
		err = decodeBody(body, &req, codeInvalidSchema)
	}
	if err != nil {
		writeError(w, err)
		return req, false
	}
	return req, true
}
