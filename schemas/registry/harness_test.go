package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"millrace/internal/leaktest"
)

// TestMain fails the tests if a goroutine outlives them: Run must return
// once its context is done, and forwarded requests must not linger.
func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }

// fakeElection is an Election a test moves by hand.
type fakeElection struct {
	mu   sync.Mutex // guards the following
	self bool
	url  string
}

func (e *fakeElection) Primary() (bool, string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.self, e.url
}

func (e *fakeElection) set(self bool, url string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.self, e.url = self, url
}

// registry is one Server under test: its view followed by Run, its API
// on a loopback listener.
type registry struct {
	srv      *Server
	http     *httptest.Server
	election *fakeElection
}

// newRegistry starts a registry over log (a fresh MemoryLog when nil),
// primary unless the election says otherwise; config edits the Config.
func newRegistry(t *testing.T, log Log, config func(*Config)) *registry {
	t.Helper()
	if log == nil {
		log = NewMemoryLog()
	}
	cfg := Config{Types: toyTypes()}
	if config != nil {
		config(&cfg)
	}
	election := &fakeElection{self: true}
	srv := New(cfg, log, election)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		hs.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return &registry{srv: srv, http: hs, election: election}
}

// do sends a request (body "" for none) with headers as name, value pairs
// and returns the status and the body.
func (r *registry) do(t *testing.T, method, path, body string, headers ...string) (int, string) {
	t.Helper()
	var reader io.Reader
	if body != "" {
		reader = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, r.http.URL+path, reader)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", contentTypeV1)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(answer)
}

// want checks a request's answer: its status and its JSON, compared
// after compaction (want "" skips the body).
func (r *registry) want(t *testing.T, method, path, body string, wantStatus int, wantBody string) string {
	t.Helper()
	status, got := r.do(t, method, path, body)
	if status != wantStatus {
		t.Fatalf("%s %s: status %d (%s), want %d", method, path, status, got, wantStatus)
	}
	if wantBody != "" && compact(t, got) != compact(t, wantBody) {
		t.Fatalf("%s %s: answered %s, want %s", method, path, got, wantBody)
	}
	return got
}

// wantError checks an error answer's status and Confluent error code.
func (r *registry) wantError(t *testing.T, method, path, body string, wantStatus, wantCode int) string {
	t.Helper()
	status, got := r.do(t, method, path, body)
	var e apiError
	if err := json.Unmarshal([]byte(got), &e); err != nil {
		t.Fatalf("%s %s: answer %q is not an error body: %v", method, path, got, err)
	}
	if status != wantStatus || e.Code != wantCode || e.Message == "" {
		t.Fatalf("%s %s: status %d, answered %s; want status %d, error_code %d", method, path, status, got, wantStatus, wantCode)
	}
	return e.Message
}

func compact(t *testing.T, s string) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		t.Fatalf("%q is not JSON: %v", s, err)
	}
	return b.String()
}

// schemaBody is a registration body for a toy schema text.
func schemaBody(text string, extra ...string) string {
	fields := append([]string{`"schema":` + quote(text)}, extra...)
	return "{" + strings.Join(fields, ",") + "}"
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
