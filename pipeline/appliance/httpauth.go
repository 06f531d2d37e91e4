package appliance

import (
	"crypto/tls"
	"net"
	"net/http"
	"net/url"
	"path/filepath"

	"millrace/internal/httpserver"
)

// TokenFileName is the generated token's file in the data directory
// (http.auth.token: generate).
const TokenFileName = "http-token"

// httpSecurity is what protects the web servers: TLS (nil: plain HTTP) and
// the authentication of the console and /metrics (nil: none).
type httpSecurity struct {
	tls       *tls.Config
	auth      *httpserver.Auth
	tokenFile string // the generated token's file, "" when none is generated
	token     string // the generated token
}

// loadHTTPSecurity reads http.tls and http.auth, generating the token on
// first start when http.auth.token is "generate".
func (a *Appliance) loadHTTPSecurity() (httpSecurity, error) {
	var sec httpSecurity
	var err error
	if sec.tls, err = a.cfg.HTTP.TLS.Load(); err != nil {
		return sec, err
	}
	authCfg := a.cfg.HTTP.Auth
	if !authCfg.On() {
		return sec, nil
	}
	files := authCfg.AuthConfig
	if authCfg.Token == TokenGenerate {
		sec.tokenFile = filepath.Join(a.cfg.Data, TokenFileName)
		token, created, err := httpserver.GenerateToken(sec.tokenFile)
		if err != nil {
			return sec, err
		}
		sec.token = token
		a.logger.Info("the console and /metrics need the token in the token file", "file", sec.tokenFile, "created", created)
		files.TokenFile = sec.tokenFile
	}
	sec.auth, err = httpserver.NewAuth(files, a.registry, a.logger.With("component", "http"))
	return sec, err
}

// protect puts h behind the authentication, when there is one.
func (s httpSecurity) protect(h http.Handler) http.Handler {
	if s.auth == nil {
		return h
	}
	return s.auth.Wrap(h)
}

// listen opens addr for the server what, over TLS when configured, and
// warns when it is open beyond loopback without authentication.
func (a *Appliance) listen(addr, what string) (net.Listener, error) {
	ln, err := httpserver.Listen(addr, a.httpSec.tls)
	if err != nil {
		return nil, err
	}
	httpserver.WarnIfOpen(a.logger, what, ln.Addr(), a.httpSec.auth != nil)
	return ln, nil
}

// HTTPScheme is "https" when http.tls is set, else "http".
func (a *Appliance) HTTPScheme() string { return httpserver.Scheme(a.httpSec.tls) }

// TokenFile is the generated token's file, "" unless http.auth.token is
// "generate".
func (a *Appliance) TokenFile() string { return a.httpSec.tokenFile }

// ConsoleLoginURL is the console's address with the generated token, which
// logs a browser in (see httpserver.Auth.Wrap); "" when no token is
// generated. It holds the token: print it to the operator, never log it.
func (a *Appliance) ConsoleLoginURL() string {
	if a.httpSec.token == "" {
		return ""
	}
	u := url.URL{Scheme: a.HTTPScheme(), Host: a.httpAddr.String(), Path: "/console", RawQuery: url.Values{"token": {a.httpSec.token}}.Encode()}
	return u.String()
}
