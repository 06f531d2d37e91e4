package cli

import (
	"os"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"millrace/internal/clientauth"
	"millrace/schemas/srclient"
)

// registryEnv sets --registry's default; registryPasswordEnv is the
// registry password, which has no flag for the reason passwordEnv has
// none.
const (
	registryEnv         = "MILLRACE_SCHEMA_REGISTRY"
	registryPasswordEnv = "MILLRACE_SCHEMA_REGISTRY_PASSWORD"
)

// registryFlags say how to reach the schema registry: the flags of every
// schema command, and of produce --value-schema and consume --decode.
type registryFlags struct {
	url, user, passwordFile, ca string
	// passwordEnv names the variable holding the password when no file
	// is given; "" reads none (import's source registry).
	passwordEnv string
}

// addRegistryFlags defines the registry flags on fs.
func addRegistryFlags(fs *pflag.FlagSet) *registryFlags {
	r := &registryFlags{passwordEnv: registryPasswordEnv}
	def := os.Getenv(registryEnv)
	if def == "" {
		def = srclient.DefaultURL
	}
	fs.StringVar(&r.url, "registry", def, "schema registry `URL`s, comma-separated (or "+registryEnv+")")
	fs.StringVar(&r.user, "registry-user", "", "schema registry basic auth `user`")
	fs.StringVar(&r.passwordFile, "registry-password-file", "", "`file` holding the registry password (or "+registryPasswordEnv+")")
	fs.StringVar(&r.ca, "registry-ca", "", "PEM `file` of the CAs that sign an https registry's certificate")
	return r
}

// config is the srclient configuration the flags give.
func (r *registryFlags) config() (srclient.Config, error) {
	cfg := srclient.Config{Username: r.user, PasswordFile: r.passwordFile}
	for _, u := range strings.Split(r.url, ",") {
		if u = strings.TrimSpace(u); u != "" {
			cfg.URLs = append(cfg.URLs, u)
		}
	}
	if cfg.PasswordFile == "" && r.passwordEnv != "" {
		cfg.Password = os.Getenv(r.passwordEnv)
	}
	if cfg.Username == "" && cfg.PasswordFile != "" {
		return cfg, usageError("a registry password file needs its user (--registry-user, or --from-user for --from)")
	}
	if cfg.Username == "" {
		cfg.Password = ""
	}
	if r.ca != "" {
		cfg.TLS = &clientauth.TLS{CA: r.ca}
	}
	if err := cfg.WithDefaults().Validate(); err != nil {
		return cfg, usageError("%v", err)
	}
	return cfg, nil
}

// client makes the registry client.
func (r *registryFlags) client() (*srclient.Client, error) {
	cfg, err := r.config()
	if err != nil {
		return nil, err
	}
	return srclient.New(cfg)
}

// parseVersion reads a --version value: a number from 1, or latest (-1).
func parseVersion(s string) (int, error) {
	if s == "latest" || s == "-1" {
		return -1, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0, usageError("--version must be a number from 1 or latest, not %q", s)
	}
	return n, nil
}
