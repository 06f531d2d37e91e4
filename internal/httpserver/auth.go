package httpserver

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// MinTokenLength is the shortest bearer token a token file may hold: 16
// characters. A generated token (GenerateToken) has 64.
const MinTokenLength = 16

// AuthConfig names the credential files that protect a server's private
// routes (the console, /metrics). Both may be set; a request passes with
// either kind of credential. Neither set means no authentication.
type AuthConfig struct {
	// TokenFile holds one bearer token: the file's first non-empty line,
	// spaces trimmed, at least 16 characters. Clients send it as
	// "Authorization: Bearer TOKEN"; a browser logs in once with
	// ?token=TOKEN on any protected URL, which sets a cookie. Keep the
	// file mode 0600. Default: none.
	TokenFile string `yaml:"token_file"`
	// BasicFile holds HTTP basic-auth credentials, one "user:password"
	// line each (the password is everything after the first colon, in
	// clear: keep the file mode 0600). Empty lines and lines starting with
	// # are skipped. Default: none.
	BasicFile string `yaml:"basic_file"`
}

// On reports whether any credential file is set.
func (c AuthConfig) On() bool { return c.TokenFile != "" || c.BasicFile != "" }

// Auth checks requests against the credentials of an AuthConfig. Every
// comparison hashes both sides with SHA-256 and compares the digests in
// constant time, so the answer's timing tells nothing about how much of a
// guess was right, nor its length.
type Auth struct {
	tokens       [][sha256.Size]byte // digests of the accepted tokens
	sessions     [][sha256.Size]byte // digests of the cookie values a token login sets
	cookieName   string
	cookieValue  string
	users        []basicUser
	logger       *slog.Logger
	failures     *prometheus.CounterVec
	challenges   []string // WWW-Authenticate values
	tokenEnabled bool
}

type basicUser struct {
	user, password [sha256.Size]byte
}

// sessionLabel keys the HMAC that turns a token into its cookie: the
// browser keeps a value derived from the token, not the token itself.
const sessionLabel = "millrace http session"

// NewAuth reads cfg's files. failures, when reg is not nil, is registered
// as millrace_http_auth_failures_total{reason="missing"|"invalid"}; a
// second NewAuth on the same registry shares the counter. Failed attempts
// are logged at warn level with the client address, method and path (never
// a credential or the query string).
func NewAuth(cfg AuthConfig, reg prometheus.Registerer, logger *slog.Logger) (*Auth, error) {
	if !cfg.On() {
		return nil, errors.New("http auth: neither token_file nor basic_file is set")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	a := &Auth{logger: logger}
	if cfg.TokenFile != "" {
		token, err := ReadToken(cfg.TokenFile)
		if err != nil {
			return nil, err
		}
		a.tokens = append(a.tokens, sha256.Sum256([]byte(token)))
		mac := hmac.New(sha256.New, []byte(token))
		mac.Write([]byte(sessionLabel))
		sum := hex.EncodeToString(mac.Sum(nil))
		// The name carries part of the digest: cookies are shared by every
		// port of a host, so two servers with different tokens on one
		// machine must not overwrite each other's login.
		a.cookieName, a.cookieValue = "millrace_"+sum[:12], sum[12:]
		a.sessions = append(a.sessions, sha256.Sum256([]byte(a.cookieValue)))
		a.tokenEnabled = true
		a.challenges = append(a.challenges, `Bearer realm="millrace"`)
	}
	if cfg.BasicFile != "" {
		users, err := readBasic(cfg.BasicFile)
		if err != nil {
			return nil, err
		}
		a.users = users
		a.challenges = append(a.challenges, `Basic realm="millrace", charset="UTF-8"`)
	}
	a.failures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "millrace_http_auth_failures_total",
		Help: "HTTP requests to protected routes refused for missing or invalid credentials.",
	}, []string{"reason"})
	if reg != nil {
		if err := reg.Register(a.failures); err != nil {
			are, ok := errors.AsType[prometheus.AlreadyRegisteredError](err)
			if !ok {
				return nil, err
			}
			a.failures = are.ExistingCollector.(*prometheus.CounterVec)
		}
	}
	return a, nil
}

// ReadToken returns the token in path (its first non-empty line, trimmed).
func ReadToken(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("http auth: token file: %w", err)
	}
	for line := range strings.Lines(string(data)) {
		if token := strings.TrimSpace(line); token != "" {
			if len(token) < MinTokenLength {
				return "", fmt.Errorf("http auth: token file %s: the token has %d characters, fewer than %d", path, len(token), MinTokenLength)
			}
			return token, nil
		}
	}
	return "", fmt.Errorf("http auth: token file %s holds no token", path)
}

func readBasic(path string) ([]basicUser, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("http auth: basic file: %w", err)
	}
	var users []basicUser
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimRight(sc.Text(), "\r")
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		user, password, ok := strings.Cut(line, ":")
		if !ok || user == "" || password == "" {
			return nil, fmt.Errorf("http auth: basic file %s line %d: want user:password", path, n)
		}
		users = append(users, basicUser{user: sha256.Sum256([]byte(user)), password: sha256.Sum256([]byte(password))})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("http auth: basic file %s: %w", path, err)
	}
	if len(users) == 0 {
		return nil, fmt.Errorf("http auth: basic file %s holds no user:password line", path)
	}
	return users, nil
}

// equal compares the digest of given with want in constant time.
func equal(given string, want [sha256.Size]byte) bool {
	sum := sha256.Sum256([]byte(given))
	return subtle.ConstantTimeCompare(sum[:], want[:]) == 1
}

// anyEqual reports whether given matches one of wants, comparing with every
// one of them.
func anyEqual(given string, wants [][sha256.Size]byte) bool {
	found := false
	for _, w := range wants {
		found = equal(given, w) || found
	}
	return found
}

// checkBasic compares user and password with every entry.
func (a *Auth) checkBasic(user, password string) bool {
	found := 0
	for _, u := range a.users {
		found |= boolInt(equal(user, u.user)) & boolInt(equal(password, u.password))
	}
	return found == 1
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Wrap returns next behind the authentication check. A request passes with
// a valid "Authorization: Bearer" token, basic-auth credentials, or the
// cookie a token login set. A GET or HEAD whose query has token=TOKEN is a
// browser login: a valid token sets an HttpOnly, SameSite=Strict cookie
// (Secure over TLS, gone when the browser closes) and redirects to the same
// URL without the token, so the token leaves the address bar and history;
// the page's own requests then carry the cookie. Anything else is answered
// 401 with a WWW-Authenticate challenge per configured scheme.
func (a *Auth) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.tokenEnabled && (r.Method == http.MethodGet || r.Method == http.MethodHead) && r.URL.Query().Has("token") {
			a.login(w, r)
			return
		}
		presented, ok := a.check(r)
		if ok {
			next.ServeHTTP(w, r)
			return
		}
		a.refuse(w, r, presented)
	})
}

// check reports whether r carries valid credentials, and whether it carried
// any at all.
func (a *Auth) check(r *http.Request) (presented, ok bool) {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, value, _ := strings.Cut(h, " ")
		switch {
		case strings.EqualFold(scheme, "Bearer") && a.tokenEnabled:
			return true, anyEqual(strings.TrimSpace(value), a.tokens)
		case strings.EqualFold(scheme, "Basic") && len(a.users) > 0:
			user, password, ok := r.BasicAuth()
			return true, ok && a.checkBasic(user, password)
		}
		return true, false
	}
	if a.tokenEnabled {
		if c, err := r.Cookie(a.cookieName); err == nil {
			return true, anyEqual(c.Value, a.sessions)
		}
	}
	return false, false
}

func (a *Auth) login(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if !anyEqual(q.Get("token"), a.tokens) {
		a.refuse(w, r, true)
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name:     a.cookieName,
		Value:    a.cookieValue,
		Path:     "/",
		HttpOnly: true,
		Secure:   r.TLS != nil,
		SameSite: http.SameSiteStrictMode,
	})
	q.Del("token")
	// Cleaned to one leading slash: "//host/x" would send the browser to
	// another site.
	clean := path.Clean("/" + r.URL.Path)
	if strings.HasSuffix(r.URL.Path, "/") && clean != "/" {
		clean += "/"
	}
	target := url.URL{Path: clean, RawQuery: q.Encode()}
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, target.String(), http.StatusSeeOther)
}

func (a *Auth) refuse(w http.ResponseWriter, r *http.Request, presented bool) {
	reason := "missing"
	if presented {
		reason = "invalid"
		a.logger.Warn("http authentication failed", "client", r.RemoteAddr, "method", r.Method, "path", r.URL.Path)
	}
	a.failures.WithLabelValues(reason).Inc()
	for _, c := range a.challenges {
		w.Header().Add("WWW-Authenticate", c)
	}
	w.Header().Set("Cache-Control", "no-store")
	http.Error(w, "authentication required", http.StatusUnauthorized)
}
