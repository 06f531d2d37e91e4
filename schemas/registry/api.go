package registry

import (
	"encoding/json"
	"errors"
	"io"
	"math"
	"mime"
	"net/http"
	"strconv"
	"strings"
)

// contentTypeV1 is the content type of every answer, Confluent's.
const contentTypeV1 = "application/vnd.schemaregistry.v1+json"

// acceptedContentTypes are the request content types Confluent takes
// (and none at all).
var acceptedContentTypes = map[string]bool{
	contentTypeV1:                         true,
	"application/vnd.schemaregistry+json": true,
	"application/json":                    true,
	"application/octet-stream":            true,
}

// bodySlack is what a request body may hold beyond the schema itself: the
// references and the other fields, and JSON escaping of the schema text
// (quotes and backslashes: a quarter more covers real schemas).
func bodySlack(maxBytes int) int64 { return int64(maxBytes)/4 + 64<<10 }

// Handler is the REST API. Serve it once CatchUp has returned: until
// then reads answer from a view that may still be filling.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	type method struct {
		name string
		op   Operation
		h    http.HandlerFunc
	}
	route := func(path string, methods ...method) {
		allowed := make([]string, len(methods))
		for i, m := range methods {
			allowed[i] = m.name
			mux.Handle(m.name+" "+path, s.guard(m.op, m.h))
		}
		// Any other method on a known path: Confluent's JSON error, not
		// the mux's plain text.
		mux.Handle(path, s.guard(OpRead, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", strings.Join(allowed, ", "))
			writeError(w, errorf(codeMethodNotAllowed, "HTTP method %s is not supported on %s; use %s.", r.Method, r.URL.Path, strings.Join(allowed, " or ")))
		}))
	}
	get := func(h http.HandlerFunc) method { return method{http.MethodGet, OpRead, h} }

	route("/{$}", get(func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, struct{}{}) }))
	route("/schemas", get(s.getSchemas))
	route("/schemas/types", get(s.getTypes))
	route("/schemas/ids/{id}", get(s.getSchemaByID))
	route("/schemas/ids/{id}/schema", get(s.getRawSchemaByID))
	route("/schemas/ids/{id}/subjects", get(s.getSubjectsByID))
	route("/schemas/ids/{id}/versions", get(s.getVersionsByID))
	route("/subjects", get(s.getSubjects))
	route("/subjects/{subject}",
		method{http.MethodPost, OpRead, s.lookupSchema},
		method{http.MethodDelete, OpDelete, s.deleteSubject})
	route("/subjects/{subject}/versions",
		get(s.getVersions),
		method{http.MethodPost, OpWrite, s.register})
	route("/subjects/{subject}/versions/{version}",
		get(s.getVersion),
		method{http.MethodDelete, OpDelete, s.deleteVersion})
	route("/subjects/{subject}/versions/{version}/schema", get(s.getRawVersion))
	route("/subjects/{subject}/versions/{version}/referencedby", get(s.getReferencedBy))
	route("/compatibility/subjects/{subject}/versions", method{http.MethodPost, OpRead, s.checkAll})
	route("/compatibility/subjects/{subject}/versions/{version}", method{http.MethodPost, OpRead, s.checkVersion})
	route("/config",
		get(s.getConfig),
		method{http.MethodPut, OpConfig, s.putConfig},
		method{http.MethodDelete, OpConfig, s.deleteConfig})
	route("/config/{subject}",
		get(s.getConfig),
		method{http.MethodPut, OpConfig, s.putConfig},
		method{http.MethodDelete, OpConfig, s.deleteConfig})
	route("/mode",
		get(s.getMode),
		method{http.MethodPut, OpConfig, s.putMode})
	route("/mode/{subject}",
		get(s.getMode),
		method{http.MethodPut, OpConfig, s.putMode},
		method{http.MethodDelete, OpConfig, s.deleteMode})
	mux.Handle("/", s.guard(OpRead, func(w http.ResponseWriter, r *http.Request) {
		writeError(w, errorf(codeNotFound, "There is no endpoint %s.", r.URL.Path))
	}))
	return mux
}

// guard authenticates and authorizes the request for op on its subject,
// and refuses request content types Confluent does not take.
func (s *Server) guard(op Operation, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a := s.cfg.Auth; a != nil {
			principal, err := a.Authenticate(r)
			if err != nil {
				w.Header().Set("WWW-Authenticate", `Basic realm="millrace schema registry"`)
				writeError(w, errorf(codeUnauthorized, "Unauthorized: %v", err))
				return
			}
			subject := r.PathValue("subject")
			if !a.Authorize(principal, op, subject) {
				writeError(w, errorf(codeForbidden, "User %s is not authorized to %s %s.", principal, opVerb(op), scopeName(subject)))
				return
			}
		}
		// Only a body's type matters: Confluent's GET and DELETE
		// endpoints consume nothing.
		if ct := r.Header.Get("Content-Type"); ct != "" && (r.Method == http.MethodPost || r.Method == http.MethodPut) {
			mt, _, err := mime.ParseMediaType(ct)
			if err != nil || !acceptedContentTypes[mt] {
				writeError(w, errorf(codeUnsupportedMediaType, "Content type %q is not supported; send %s.", ct, contentTypeV1))
				return
			}
		}
		h(w, r)
	})
}

func opVerb(op Operation) string {
	switch op {
	case OpWrite:
		return "register schemas under"
	case OpDelete:
		return "delete"
	case OpConfig:
		return "change the configuration of"
	}
	return "read"
}

func scopeName(subject string) string {
	if subject == "" {
		return "the registry"
	}
	return "subject '" + subject + "'"
}

// readBody reads a request body of at most the schema limit plus slack;
// a larger one is refused as an invalid schema with the reason.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	limit := int64(s.cfg.Limits.MaxBytes) + bodySlack(s.cfg.Limits.MaxBytes)
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return nil, errInvalidSchema("the request body exceeds " + strconv.FormatInt(limit, 10) + " bytes: the schema is limited to " + strconv.Itoa(s.cfg.Limits.MaxBytes) + " bytes")
	}
	if err != nil {
		return nil, errorf(codeUnprocessable, "The request body could not be read: %v", err)
	}
	return body, nil
}

// decodeBody decodes a JSON body into v; an empty or malformed one is 422
// with code, as Confluent answers a body it cannot map.
func decodeBody(body []byte, v any, code int) error {
	if len(body) == 0 {
		return errorf(code, "The request needs a JSON body.")
	}
	if err := json.Unmarshal(body, v); err != nil {
		return errorf(code, "The request body is not the JSON expected: %v", err)
	}
	return nil
}

// latestVersion stands for "latest" (and Confluent's -1) in a version
// path parameter.
const latestVersion = -1

// parseVersion parses a version path parameter: 1 to 2^31-1, "latest" or
// -1, as Confluent's VersionId.
func parseVersion(s string) (int, error) {
	if s == "latest" || s == "-1" {
		return latestVersion, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 1 || n > math.MaxInt32 {
		return 0, errorf(codeInvalidVersion, "The specified version '%s' is not a valid version id. Allowed values are between [1, 2^31-1] and the string \"latest\"", s)
	}
	return int(n), nil
}

// queryBool reads a boolean query parameter as Confluent's (Jersey's)
// does: "true" in any case is true, anything else false.
func queryBool(r *http.Request, name string) bool {
	return strings.EqualFold(r.URL.Query().Get(name), "true")
}

// readView calls f with the view read-locked and answers what it returns.
func (s *Server) readView(w http.ResponseWriter, f func(*State) (any, error)) {
	s.mu.RLock()
	v, err := f(s.state)
	s.mu.RUnlock()
	if err != nil {
		writeError(w, err)
		return
	}
	if raw, ok := v.(rawText); ok {
		w.Header().Set("Content-Type", contentTypeV1)
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(raw))
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// rawText is an answer written as is: the /schema endpoints answer the
// schema text, not a JSON string of it.
type rawText string
