package appliance

import (
	"net/url"
	"path/filepath"

	"millrace/internal/httpserver"
)

// TokenFileName is the generated token's file in the data directory
// (http.auth.token: generate).
const TokenFileName = "http-token"

// httpSecurity is what protects the web servers: TLS and the
// authentication of the console and /metrics, and the generated token.
type httpSecurity struct {
	httpserver.Security
	tokenFile string // the generated token's file, "" when none is generated
	token     string // the generated token
}

// loadHTTPSecurity reads http.tls and http.auth, generating the token on
// first start when http.auth.token is "generate".
func (a *Appliance) loadHTTPSecurity() (httpSecurity, error) {
	var sec httpSecurity
	files := a.cfg.HTTP.Auth.AuthConfig
	if a.cfg.HTTP.Auth.Token == TokenGenerate {
		sec.tokenFile = filepath.Join(a.cfg.Data, TokenFileName)
		token, created, err := httpserver.GenerateToken(sec.tokenFile)
		if err != nil {
			return sec, err
		}
		sec.token = token
		a.logger.Info("the console and /metrics need the token in the token file", "file", sec.tokenFile, "created", created)
		files.TokenFile = sec.tokenFile
	}
	var err error
	sec.Security, err = httpserver.LoadSecurity(a.cfg.HTTP.TLS, files, a.registry, a.logger.With("component", "http"))
	return sec, err
}

// HTTPScheme is "https" when http.tls is set, else "http".
func (a *Appliance) HTTPScheme() string { return a.httpSec.Scheme() }

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
