package registry

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
)

// forwardedHeader marks a write one registry forwarded to the primary, so a
// registry that is not primary (the election moved meanwhile) answers it
// 50003 instead of forwarding it around.
const forwardedHeader = "X-Millrace-Forwarded"

// maxForwardAnswer bounds the primary's answer relayed to the client: write
// answers are an ID, a version list or a setting.
const maxForwardAnswer = 1 << 20

// change is one write, built from the view on the primary: the records to
// append (none when the write is already in the view, as an idempotent
// registration is) and the answer once they are applied.
type change struct {
	records []Record
	answer  any
}

// serveWrite carries out a write: on the primary, build runs against a view
// caught up with the log, its records are appended, and the answer waits
// until the view has applied them, so a read after the answer sees the
// write. Elsewhere the request goes to the primary as it came.
func (s *Server) serveWrite(w http.ResponseWriter, r *http.Request, body []byte, build func(*State) (change, error)) {
	self, url := s.election.Primary()
	if !self {
		s.forward(w, r, body, url)
		return
	}
	answer, err := s.write(r.Context(), build)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, answer)
}

func (s *Server) write(ctx context.Context, build func(*State) (change, error)) (any, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.WriteTimeout)
	defer cancel()
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	// Catch up first: a primary that has just been elected may not have
	// applied its predecessor's last writes, and must not hand out their
	// IDs again. Doing it on every write costs one End call and covers
	// every way of becoming primary.
	if err := s.CatchUp(ctx); ctx.Err() != nil {
		return nil, errorf(codeOperationTimeout, "The registry did not catch up with _schemas within %v; retry.", s.cfg.WriteTimeout)
	} else if err != nil {
		return nil, errorf(codeStoreError, "Error in the backend data store: the end of _schemas is unknown: %v", err)
	}
	s.mu.RLock()
	c, err := build(s.state)
	s.mu.RUnlock()
	if err != nil || len(c.records) == 0 {
		return c.answer, err
	}
	last, err := s.log.Append(ctx, c.records)
	if errors.Is(err, ErrFenced) {
		return nil, errorf(codeForwardingError, "This registry stopped being the primary before the write landed; nothing was written. Retry: the request will reach the new primary.")
	}
	if err != nil {
		return nil, errorf(codeStoreError, "Error in the backend data store: appending to _schemas failed: %v", err)
	}
	if err := s.WaitFor(ctx, last); err != nil {
		return nil, errorf(codeOperationTimeout, "The write was appended to _schemas but not applied within %v; it will take effect.", s.cfg.WriteTimeout)
	}
	return c.answer, nil
}

// forward sends the request to the primary at url and relays its answer.
func (s *Server) forward(w http.ResponseWriter, r *http.Request, body []byte, url string) {
	if r.Header.Get(forwardedHeader) != "" {
		writeError(w, errorf(codeForwardingError, "This registry received a forwarded write but is not the primary; retry once the election settles."))
		return
	}
	if url == "" {
		writeError(w, errorf(codeForwardingError, "There is no primary registry to take writes right now; retry shortly."))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.ForwardTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, r.Method, strings.TrimRight(url, "/")+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		writeError(w, errorf(codeForwardingError, "Error while forwarding the request to the primary at %s: %v", url, err))
		return
	}
	for _, h := range []string{"Authorization", "Content-Type", "Accept"} {
		if v := r.Header.Get(h); v != "" {
			req.Header.Set(h, v)
		}
	}
	req.Header.Set(forwardedHeader, "1")
	resp, err := s.cfg.Client.Do(req)
	if err != nil {
		writeError(w, errorf(codeForwardingError, "Error while forwarding the request to the primary at %s: %v", url, err))
		return
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxForwardAnswer))
	if err != nil {
		writeError(w, errorf(codeForwardingError, "Error while reading the primary's answer from %s: %v", url, err))
		return
	}
	for _, h := range []string{"Content-Type", "WWW-Authenticate"} {
		if v := resp.Header.Get(h); v != "" {
			w.Header().Set(h, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(answer)
}
