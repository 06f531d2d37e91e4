package registry

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// Confluent's error codes: the HTTP status times 100 plus a sequence, so a
// client can tell "subject not found" from "version not found" under one
// 404. The numbers are the Schema Registry's (io.confluent.kafka.schemaregistry
// .rest.exceptions), which clients such as confluent-kafka match on.
const (
	codeUnauthorized          = 401
	codeForbidden             = 40301
	codeSubjectNotFound       = 40401
	codeVersionNotFound       = 40402
	codeSchemaNotFound        = 40403
	codeSubjectSoftDeleted    = 40404
	codeSubjectNotSoftDeleted = 40405
	codeVersionSoftDeleted    = 40406
	codeVersionNotSoftDeleted = 40407
	codeSubjectCompatNotFound = 40408
	codeSubjectModeNotFound   = 40409
	codeNotFound              = 404 // no such endpoint
	codeMethodNotAllowed      = 405
	codeIncompatible          = 409
	codeUnsupportedMediaType  = 415
	codeUnprocessable         = 422 // a body that is not JSON of the right shape
	codeInvalidSchema         = 42201
	codeInvalidVersion        = 42202
	codeInvalidCompatibility  = 42203
	codeInvalidMode           = 42204
	codeOperationNotPermitted = 42205
	codeReferenceExists       = 42206
	codeInvalidSubject        = 42208
	codeIDDoesNotMatch        = 42207
	codeStoreError            = 50001
	codeOperationTimeout      = 50002
	codeForwardingError       = 50003
)

// apiError is an error answered to the client: Confluent's JSON error body
// under the HTTP status its code starts with.
type apiError struct {
	Code    int    `json:"error_code"`
	Message string `json:"message"`
}

func (e *apiError) Error() string { return e.Message }

// status is the HTTP status a code is answered with: its first three
// digits (40401 → 404, 409 → 409).
func (e *apiError) status() int {
	c := e.Code
	for c >= 1000 {
		c /= 10
	}
	return c
}

func errorf(code int, format string, args ...any) *apiError {
	return &apiError{Code: code, Message: fmt.Sprintf(format, args...)}
}

func errSubjectNotFound(subject string) *apiError {
	return errorf(codeSubjectNotFound, "Subject '%s' not found.", subject)
}

func errVersionNotFound(subject string, version int) *apiError {
	return errorf(codeVersionNotFound, "Version %d not found for subject '%s'.", version, subject)
}

func errSchemaNotFound() *apiError {
	return errorf(codeSchemaNotFound, "Schema not found.")
}

func errInvalidSchema(reason string) *apiError {
	return errorf(codeInvalidSchema, "Invalid schema: %s", reason)
}

func errReadOnly(subject string) *apiError {
	if subject == "" {
		return errorf(codeOperationNotPermitted, "The registry is in read-only mode; set the mode to READWRITE to change it.")
	}
	return errorf(codeOperationNotPermitted, "Subject '%s' is in read-only mode; set its mode to READWRITE to change it.", subject)
}

// writeJSON answers v with Confluent's content type.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		// Every answer is built from plain values; a failure here is a
		// bug, answered as a store error rather than a broken body.
		status = http.StatusInternalServerError
		body = []byte(`{"error_code":50001,"message":"The registry could not encode its answer."}`)
	}
	w.Header().Set("Content-Type", contentTypeV1)
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// writeError answers err: an apiError as itself, anything else as a store
// error (the message is the error's sentence).
func writeError(w http.ResponseWriter, err error) {
	ae, ok := err.(*apiError)
	if !ok {
		ae = errorf(codeStoreError, "Error in the backend data store: %v", err)
	}
	writeJSON(w, ae.status(), ae)
}
