package appliance

import (
	"strings"
	"testing"

	"millrace/agents/beacon"
	"millrace/internal/httpserver"
)

func TestValidateHTTPSecurity(t *testing.T) {
	for name, c := range map[string]struct {
		http   HTTPConfig
		beacon *beacon.Config
		want   string // in the error; "" accepts
	}{
		"generate":              {http: HTTPConfig{Auth: HTTPAuthConfig{Token: TokenGenerate}}},
		"files":                 {http: HTTPConfig{Auth: HTTPAuthConfig{AuthConfig: httpserver.AuthConfig{TokenFile: "t", BasicFile: "b"}}}},
		"generate and basic":    {http: HTTPConfig{Auth: HTTPAuthConfig{Token: TokenGenerate, AuthConfig: httpserver.AuthConfig{BasicFile: "b"}}}},
		"tls":                   {http: HTTPConfig{TLS: &httpserver.TLSConfig{Cert: "c.pem"}}},
		"a token in the config": {http: HTTPConfig{Auth: HTTPAuthConfig{Token: "s3cret-s3cret-s3cret"}}, want: "http.auth.token"},
		"generate and file":     {http: HTTPConfig{Auth: HTTPAuthConfig{Token: TokenGenerate, AuthConfig: httpserver.AuthConfig{TokenFile: "t"}}}, want: "keep one"},
		"tls without cert":      {http: HTTPConfig{TLS: &httpserver.TLSConfig{Key: "k.pem"}}, want: "http.tls: cert is required"},
		"beacon tls":            {beacon: &beacon.Config{TLS: &httpserver.TLSConfig{Cert: "c.pem"}}, want: "set http.tls instead"},
	} {
		err := Config{HTTP: c.http, Beacon: c.beacon}.withDefaults().Validate()
		if c.want == "" && err != nil {
			t.Errorf("%s: rejected: %v", name, err)
		}
		if c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: error %v, want one saying %q", name, err, c.want)
		}
	}
	if (HTTPAuthConfig{}).On() || !(HTTPAuthConfig{Token: TokenGenerate}).On() || !(HTTPAuthConfig{AuthConfig: httpserver.AuthConfig{BasicFile: "b"}}).On() {
		t.Error("On")
	}
}
