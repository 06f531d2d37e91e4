package httpserver

import (
	"bytes"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

const testToken = "0123456789abcdef0123456789abcdef"

// newTestAuth protects a handler answering "secret" with a token file and a
// basic file, logging into the returned buffer.
func newTestAuth(t *testing.T) (http.Handler, *Auth, *bytes.Buffer) {
	t.Helper()
	dir := t.TempDir()
	tokenFile, basicFile := filepath.Join(dir, "token"), filepath.Join(dir, "basic")
	if err := os.WriteFile(tokenFile, []byte("\n"+testToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(basicFile, []byte("# operators\nalice:pa:ss\r\n\nbob:hunter22\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	a, err := NewAuth(AuthConfig{TokenFile: tokenFile, BasicFile: basicFile}, prometheus.NewRegistry(), slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	h := a.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("secret")) }))
	return h, a, &logs
}

func TestAuthBearerAndBasic(t *testing.T) {
	t.Parallel()
	h, a, logs := newTestAuth(t)
	for _, c := range []struct {
		name   string
		set    func(*http.Request)
		status int
	}{
		{"nothing", func(*http.Request) {}, 401},
		{"bearer", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+testToken) }, 200},
		{"bearer, scheme in lower case", func(r *http.Request) { r.Header.Set("Authorization", "bearer "+testToken) }, 200},
		// The constant-time comparison rejects a prefix, an extension and
		// a same-length guess alike.
		{"bearer prefix", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+testToken[:31]) }, 401},
		{"bearer longer", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+testToken+"0") }, 401},
		{"bearer last byte wrong", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+testToken[:31]+"0") }, 401},
		{"basic", func(r *http.Request) { r.SetBasicAuth("bob", "hunter22") }, 200},
		{"basic password with a colon", func(r *http.Request) { r.SetBasicAuth("alice", "pa:ss") }, 200},
		{"basic wrong password", func(r *http.Request) { r.SetBasicAuth("bob", "hunter2") }, 401},
		{"basic another user's password", func(r *http.Request) { r.SetBasicAuth("alice", "hunter22") }, 401},
		{"basic token as password", func(r *http.Request) { r.SetBasicAuth("bob", testToken) }, 401},
		{"unknown scheme", func(r *http.Request) { r.Header.Set("Authorization", "Digest x") }, 401},
	} {
		r := httptest.NewRequest("GET", "/console/api/snapshot", nil)
		r.RemoteAddr = "192.0.2.7:4242"
		c.set(r)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != c.status {
			t.Errorf("%s: status %d, want %d", c.name, w.Code, c.status)
		}
		if c.status == 401 {
			got := w.Result().Header.Values("WWW-Authenticate")
			if len(got) != 2 || !strings.HasPrefix(got[0], "Bearer ") || !strings.HasPrefix(got[1], "Basic ") {
				t.Errorf("%s: WWW-Authenticate %q", c.name, got)
			}
			if strings.Contains(w.Body.String(), "secret") {
				t.Errorf("%s: the protected answer leaked", c.name)
			}
		}
	}
	if got := testutil.ToFloat64(a.failures.WithLabelValues("invalid")); got != 7 {
		t.Errorf("invalid failures counted %v, want 7", got)
	}
	if got := testutil.ToFloat64(a.failures.WithLabelValues("missing")); got != 1 {
		t.Errorf("missing failures counted %v, want 1", got)
	}
	if n := strings.Count(logs.String(), "http authentication failed"); n != 7 {
		t.Errorf("%d failures logged, want 7:\n%s", n, logs)
	}
	if !strings.Contains(logs.String(), "client=192.0.2.7:4242") {
		t.Errorf("the client address is not logged:\n%s", logs)
	}
	for _, secret := range []string{testToken[:16], "hunter2", "pa:ss"} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("a credential reached the log:\n%s", logs)
		}
	}
}

// A browser logs in with ?token=, gets an HttpOnly SameSite=Strict cookie
// and a redirect to the same URL without the token; with the cookie alone
// it passes. A wrong token sets nothing.
func TestAuthCookieLogin(t *testing.T) {
	t.Parallel()
	h, _, logs := newTestAuth(t)
	srv := httptest.NewServer(h)
	defer srv.Close()
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	resp, err := noFollow.Get(srv.URL + "/console?token=wrong-token-of-some-length&x=1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 || len(resp.Cookies()) != 0 {
		t.Fatalf("wrong token: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	if strings.Contains(logs.String(), "wrong-token") {
		t.Fatalf("the query reached the log:\n%s", logs)
	}

	resp, err = noFollow.Get(srv.URL + "/console?token=" + testToken + "&x=1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/console?x=1" {
		t.Fatalf("login: %d to %q, want 303 to /console?x=1", resp.StatusCode, resp.Header.Get("Location"))
	}
	for from, to := range map[string]string{"//evil.example/x": "/evil.example/x", "/console/": "/console/"} {
		req, _ := http.NewRequest("GET", srv.URL+"/?token="+testToken, nil)
		req.URL.Path = from
		resp, err := noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("Location"); got != to {
			t.Errorf("login at %q redirects to %q, want %q", from, got, to)
		}
	}
	cookies := resp.Cookies()
	if len(cookies) != 1 {
		t.Fatalf("cookies %v", cookies)
	}
	c := cookies[0]
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.Secure {
		t.Fatalf("cookie %+v: want HttpOnly, SameSite=Strict, Path=/, not Secure over plain HTTP", c)
	}
	if strings.Contains(c.Value, testToken) || strings.Contains(c.Name, testToken[:12]) {
		t.Fatalf("the cookie holds the token: %+v", c)
	}

	req, _ := http.NewRequest("GET", srv.URL+"/console/api/snapshot", nil)
	req.AddCookie(&http.Cookie{Name: c.Name, Value: c.Value})
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("with the cookie: %d", resp.StatusCode)
	}
	req, _ = http.NewRequest("GET", srv.URL+"/console/api/snapshot", nil)
	req.AddCookie(&http.Cookie{Name: c.Name, Value: c.Value[:len(c.Value)-1] + "x"})
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("with a forged cookie: %d", resp.StatusCode)
	}
}

func TestAuthRejectsBadFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for name, cfg := range map[string]AuthConfig{
		"nothing":         {},
		"missing token":   {TokenFile: filepath.Join(dir, "absent")},
		"empty token":     {TokenFile: write("empty", "\n\n")},
		"short token":     {TokenFile: write("short", "abc\n")},
		"basic no colon":  {BasicFile: write("nocolon", "alice\n")},
		"basic no pass":   {BasicFile: write("nopass", "alice:\n")},
		"basic only note": {BasicFile: write("comment", "# nobody\n")},
	} {
		if _, err := NewAuth(cfg, nil, nil); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// A token is made once with mode 0600 and read back on later starts.
func TestGenerateTokenOnceWithMode0600(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "http", "token")
	token, created, err := GenerateToken(path)
	if err != nil || !created {
		t.Fatalf("first start: created %v, %v", created, err)
	}
	if len(token) != 64 {
		t.Fatalf("token %q: want 32 random bytes in hex", token)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600", info.Mode().Perm())
	}
	again, created, err := GenerateToken(path)
	if err != nil || created || again != token {
		t.Fatalf("second start: %q created %v err %v, want the first token reused", again, created, err)
	}
	other, _, err := GenerateToken(filepath.Join(t.TempDir(), "token"))
	if err != nil || other == token {
		t.Fatalf("another directory's token %q (%v) equals the first", other, err)
	}
}

func TestWarnIfOpen(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		addr string
		auth bool
		warn bool
	}{
		{"127.0.0.1:8090", false, false},
		{"127.1.2.3:8090", false, false},
		{"[::1]:8090", false, false},
		{"0.0.0.0:8090", false, true},
		{"[::]:8090", false, true},
		{"192.0.2.1:8090", false, true},
		{"0.0.0.0:8090", true, false},
	} {
		addr, err := net.ResolveTCPAddr("tcp", c.addr)
		if err != nil {
			t.Fatal(err)
		}
		var logs bytes.Buffer
		WarnIfOpen(slog.New(slog.NewTextHandler(&logs, nil)), "console", addr, c.auth)
		warned := strings.Contains(logs.String(), "level=WARN") && strings.Contains(logs.String(), "addr="+addr.String())
		if warned != c.warn || (!c.warn && logs.Len() > 0) {
			t.Errorf("%s auth %v: log %q, want a warning: %v", c.addr, c.auth, logs.String(), c.warn)
		}
	}
}

// BenchmarkAuth is the check's cost per request, by credential kind.
func BenchmarkAuth(b *testing.B) {
	dir := b.TempDir()
	tokenFile, basicFile := filepath.Join(dir, "token"), filepath.Join(dir, "basic")
	if err := os.WriteFile(tokenFile, []byte(testToken), 0o600); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(basicFile, []byte("alice:secret1\nbob:hunter22\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	a, err := NewAuth(AuthConfig{TokenFile: tokenFile, BasicFile: basicFile}, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	h := a.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for name, set := range map[string]func(*http.Request){
		"none":   func(*http.Request) {},
		"bearer": func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+testToken) },
		"basic":  func(r *http.Request) { r.SetBasicAuth("bob", "hunter22") },
		"cookie": func(r *http.Request) { r.AddCookie(&http.Cookie{Name: a.cookieName, Value: a.cookieValue}) },
	} {
		b.Run(name, func(b *testing.B) {
			r := httptest.NewRequest("GET", "/console/api/snapshot", nil)
			set(r)
			for b.Loop() {
				h.ServeHTTP(discardWriter{header: http.Header{}}, r)
			}
		})
	}
}

// discardWriter drops an answer; a recorder reused by a benchmark would
// grow its body with every refusal.
type discardWriter struct{ header http.Header }

func (w discardWriter) Header() http.Header         { return w.header }
func (w discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w discardWriter) WriteHeader(int)             {}
