package registry

import (
	"context"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"time"
)

// GET /schemas/types: the schema types served.
func (s *Server) getTypes(w http.ResponseWriter, r *http.Request) {
	types := []string{}
	for name := range s.cfg.Types {
		types = append(types, name)
	}
	sort.Strings(types)
	writeJSON(w, http.StatusOK, types)
}

// GET /schemas: every subject version (live ones unless ?deleted), with
// ?subjectPrefix and ?latestOnly.
func (s *Server) getSchemas(w http.ResponseWriter, r *http.Request) {
	deleted, latestOnly := queryBool(r, "deleted"), queryBool(r, "latestOnly")
	s.readView(w, func(st *State) (any, error) {
		out := []versionAnswer{}
		for _, subject := range st.subjectNames(r.URL.Query().Get("subjectPrefix"), deleted, false) {
			versions := st.subjects[subject].live(deleted)
			if latestOnly {
				versions = versions[len(versions)-1:]
			}
			for _, v := range versions {
				out = append(out, st.versionAnswer(subject, v))
			}
		}
		return out, nil
	})
}

// GET /schemas/ids/{id}: the schema with that ID, while a version (even a
// soft-deleted one) holds it.
func (s *Server) getSchemaByID(w http.ResponseWriter, r *http.Request) {
	s.readID(w, r, func(st *State, e *schemaEntry) any {
		return schemaAnswer{SchemaType: shownType(e.schemaType), References: e.refs, Schema: e.text}
	})
}

// GET /schemas/ids/{id}/schema: the text alone.
func (s *Server) getRawSchemaByID(w http.ResponseWriter, r *http.Request) {
	s.readID(w, r, func(_ *State, e *schemaEntry) any { return rawText(e.text) })
}

// GET /schemas/ids/{id}/subjects: the subjects holding the ID (live
// versions unless ?deleted).
func (s *Server) getSubjectsByID(w http.ResponseWriter, r *http.Request) {
	deleted := queryBool(r, "deleted")
	s.readID(w, r, func(st *State, e *schemaEntry) any {
		subjects := []string{}
		for _, sv := range st.versionsOf(e.id, deleted) {
			subjects = append(subjects, sv.subject)
		}
		return slices.Compact(subjects)
	})
}

// subjectVersionAnswer is one entry of GET /schemas/ids/{id}/versions.
type subjectVersionAnswer struct {
	Subject string `json:"subject"`
	Version int    `json:"version"`
}

// GET /schemas/ids/{id}/versions: the subject versions holding the ID.
func (s *Server) getVersionsByID(w http.ResponseWriter, r *http.Request) {
	deleted := queryBool(r, "deleted")
	s.readID(w, r, func(st *State, e *schemaEntry) any {
		out := []subjectVersionAnswer{}
		for _, sv := range st.versionsOf(e.id, deleted) {
			out = append(out, subjectVersionAnswer{sv.subject, sv.version})
		}
		return out
	})
}

func (s *Server) readID(w http.ResponseWriter, r *http.Request, answer func(*State, *schemaEntry) any) {
	id, err := strconv.Atoi(r.PathValue("id"))
	if err == nil && !s.knows(id) {
		// An ID this view lacks may have been registered a moment ago
		// through the primary, whose view answered the writer before this
		// one applied it: a producer framing records with it at once must
		// not have them refused (a sink would dead-letter them). Catch up
		// with the log, briefly, before answering 40403.
		ctx, cancel := context.WithTimeout(r.Context(), catchUpOnMiss)
		_ = s.CatchUp(ctx) // on failure the view answers as it stands
		cancel()
	}
	s.readView(w, func(st *State) (any, error) {
		e, ok := st.schemas[id]
		if err != nil || !ok || st.uses[id] == 0 {
			return nil, errSchemaNotFound()
		}
		return answer(st, e), nil
	})
}

// versionsOf returns the subject versions holding id (live ones unless
// deleted), ordered by subject and version.
func (st *State) versionsOf(id int, deleted bool) []subjectVersion {
	var out []subjectVersion
	for subject, sub := range st.subjects {
		for _, v := range sub.live(deleted) {
			if v.id == id {
				out = append(out, subjectVersion{subject, v.version})
			}
		}
	}
	slices.SortFunc(out, func(a, b subjectVersion) int {
		if a.subject != b.subject {
			if a.subject < b.subject {
				return -1
			}
			return 1
		}
		return a.version - b.version
	})
	return out
}

// catchUpOnMiss bounds the catching up of a read of an unknown ID.
const catchUpOnMiss = 2 * time.Second

// knows reports whether the view holds schema id.
func (s *Server) knows(id int) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	_, ok := s.state.schemas[id]
	return ok
}
