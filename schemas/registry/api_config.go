package registry

import (
	"net/http"
	"strings"

	"millrace/schemas/format"
)

// compatAnswer is GET /config; PUT answers compatRequest's shape, as
// Confluent's does.
type compatAnswer struct {
	CompatibilityLevel string `json:"compatibilityLevel"`
}

type compatRequest struct {
	Compatibility string `json:"compatibility"`
}

type modeAnswer struct {
	Mode string `json:"mode"`
}

// GET /config and /config/{subject} (?defaultToGlobal).
func (s *Server) getConfig(w http.ResponseWriter, r *http.Request) {
	subject := r.PathValue("subject")
	s.readView(w, func(st *State) (any, error) {
		if subject == "" {
			return compatAnswer{st.effectiveCompat("")}, nil
		}
		if sub := st.subjects[subject]; sub != nil && sub.compat != "" {
			return compatAnswer{sub.compat}, nil
		}
		if queryBool(r, "defaultToGlobal") {
			return compatAnswer{st.effectiveCompat("")}, nil
		}
		return nil, errorf(codeSubjectCompatNotFound, "Subject '%s' does not have subject-level compatibility configured.", subject)
	})
}

// PUT /config and /config/{subject}.
func (s *Server) putConfig(w http.ResponseWriter, r *http.Request) {
	subject := r.PathValue("subject")
	body, err := s.readBody(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	s.serveWrite(w, r, body, func(st *State) (change, error) {
		var req compatRequest
		if err := decodeBody(body, &req, codeInvalidCompatibility); err != nil {
			return change{}, err
		}
		level := strings.ToUpper(req.Compatibility)
		if !validLevel(level) {
			return change{}, errorf(codeInvalidCompatibility, "Invalid compatibility level %q. Valid values are NONE, BACKWARD, FORWARD, FULL, BACKWARD_TRANSITIVE, FORWARD_TRANSITIVE and FULL_TRANSITIVE.", req.Compatibility)
		}
		if subject != "" {
			if err := validSubject(subject); err != nil {
				return change{}, err
			}
		}
		record := Record{Key: scopeKey(keyConfig, subject), Value: mustJSON(configValue{level})}
		return change{records: []Record{record}, answer: compatRequest{level}}, nil
	})
}

// DELETE /config (back to the default) and /config/{subject} (back to the
// global level), answering the level removed.
func (s *Server) deleteConfig(w http.ResponseWriter, r *http.Request) {
	subject := r.PathValue("subject")
	s.serveWrite(w, r, nil, func(st *State) (change, error) {
		previous := st.effectiveCompat(subject)
		if subject != "" {
			sub := st.subjects[subject]
			if sub == nil {
				return change{}, errSubjectNotFound(subject)
			}
			if sub.compat == "" {
				return change{}, errorf(codeSubjectCompatNotFound, "Subject '%s' does not have subject-level compatibility configured.", subject)
			}
		}
		return change{records: []Record{{Key: scopeKey(keyConfig, subject)}}, answer: compatAnswer{previous}}, nil
	})
}

// GET /mode and /mode/{subject} (?defaultToGlobal).
func (s *Server) getMode(w http.ResponseWriter, r *http.Request) {
	subject := r.PathValue("subject")
	s.readView(w, func(st *State) (any, error) {
		if subject == "" {
			return modeAnswer{st.effectiveMode("")}, nil
		}
		if sub := st.subjects[subject]; sub != nil && sub.mode != "" {
			return modeAnswer{sub.mode}, nil
		}
		if queryBool(r, "defaultToGlobal") {
			return modeAnswer{st.effectiveMode("")}, nil
		}
		return nil, errorf(codeSubjectModeNotFound, "Subject '%s' does not have subject-level mode configured.", subject)
	})
}

// PUT /mode and /mode/{subject}. IMPORT is refused while the scope holds
// schemas, unless ?force=true: imported IDs would collide with them.
func (s *Server) putMode(w http.ResponseWriter, r *http.Request) {
	subject := r.PathValue("subject")
	body, err := s.readBody(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	force := queryBool(r, "force")
	s.serveWrite(w, r, body, func(st *State) (change, error) {
		var req modeAnswer
		if err := decodeBody(body, &req, codeInvalidMode); err != nil {
			return change{}, err
		}
		mode := strings.ToUpper(req.Mode)
		if !validMode(mode) {
			return change{}, errorf(codeInvalidMode, "Invalid mode %q. Valid values are READWRITE, READONLY and IMPORT.", req.Mode)
		}
		if subject != "" {
			if err := validSubject(subject); err != nil {
				return change{}, err
			}
		}
		if mode == ModeImport && st.effectiveMode(subject) != ModeImport && !force && st.holdsSchemas(subject) {
			return change{}, errorf(codeOperationNotPermitted, "Cannot import since found existing subjects in %s; empty it first or set force=true.", scopeName(subject))
		}
		record := Record{Key: scopeKey(keyMode, subject), Value: mustJSON(modeValue{mode})}
		return change{records: []Record{record}, answer: modeAnswer{mode}}, nil
	})
}

// holdsSchemas reports whether subject ("" for the whole registry) has a
// version, soft-deleted or not.
func (st *State) holdsSchemas(subject string) bool {
	if subject != "" {
		sub := st.subjects[subject]
		return sub != nil && len(sub.versions) > 0
	}
	for _, sub := range st.subjects {
		if len(sub.versions) > 0 {
			return true
		}
	}
	return false
}

// DELETE /mode/{subject}: back to the global mode, answering the mode
// removed.
func (s *Server) deleteMode(w http.ResponseWriter, r *http.Request) {
	subject := r.PathValue("subject")
	s.serveWrite(w, r, nil, func(st *State) (change, error) {
		sub := st.subjects[subject]
		if sub == nil || sub.mode == "" {
			return change{}, errorf(codeSubjectModeNotFound, "Subject '%s' does not have subject-level mode configured.", subject)
		}
		return change{records: []Record{{Key: scopeKey(keyMode, subject)}}, answer: modeAnswer{sub.mode}}, nil
	})
}

// compatibilityAnswer is the compatibility check's answer; Messages only
// with ?verbose=true.
type compatibilityAnswer struct {
	IsCompatible bool      `json:"is_compatible"`
	Messages     *[]string `json:"messages,omitempty"`
}

// POST /compatibility/subjects/{subject}/versions: would the schema be
// accepted, checked against the versions the subject's level names?
func (s *Server) checkAll(w http.ResponseWriter, r *http.Request) {
	s.checkCompatibility(w, r, func(st *State, subject string) ([]versionEntry, error) {
		if sub := st.subjects[subject]; sub != nil {
			return sub.live(false), nil
		}
		return nil, nil
	})
}

// POST /compatibility/subjects/{subject}/versions/{version}: checked
// against that one version, in the direction the subject's level names.
func (s *Server) checkVersion(w http.ResponseWriter, r *http.Request) {
	version, err := parseVersion(r.PathValue("version"))
	if err != nil {
		writeError(w, err)
		return
	}
	s.checkCompatibility(w, r, func(st *State, subject string) ([]versionEntry, error) {
		v, err := st.version(subject, version, false)
		if err != nil {
			return nil, err
		}
		return []versionEntry{v}, nil
	})
}

func (s *Server) checkCompatibility(w http.ResponseWriter, r *http.Request, against func(*State, string) ([]versionEntry, error)) {
	subject := r.PathValue("subject")
	req, ok := s.readSchemaRequest(w, r)
	if !ok {
		return
	}
	verbose := queryBool(r, "verbose")
	s.readView(w, func(st *State) (any, error) {
		versions, err := against(st, subject)
		if err != nil {
			return nil, err
		}
		parsed, err := st.prepare(&req)
		if err != nil {
			return nil, err
		}
		var previous []format.Schema
		for _, v := range versions {
			if p := st.schemas[v.id].parsed; p != nil {
				previous = append(previous, p)
			}
		}
		messages := checkCompat(st.effectiveCompat(subject), parsed, previous)
		answer := compatibilityAnswer{IsCompatible: len(messages) == 0}
		if verbose {
			all := append([]string{}, messages...)
			answer.Messages = &all
		}
		return answer, nil
	})
}
