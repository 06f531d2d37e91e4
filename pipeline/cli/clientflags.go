package cli

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"millrace/internal/clientauth"
)

// defaultBrokers is where client commands look for a broker when neither -b
// nor MILLRACE_BROKERS says otherwise: a broker started with its defaults.
const defaultBrokers = "127.0.0.1:9092"

// passwordEnv holds the SASL password. There is deliberately no flag for it:
// a command line shows in ps and in shell history.
const passwordEnv = "MILLRACE_SASL_PASSWORD"

// clientEnvHelp tells how the environment sets the client flags: one
// paragraph, which help wraps.
const clientEnvHelp = `Every client flag has an environment variable, MILLRACE_ and its name in capitals ` +
	`(MILLRACE_BROKERS, MILLRACE_TLS, MILLRACE_TLS_CA, MILLRACE_TLS_CERT, MILLRACE_TLS_KEY, ` +
	`MILLRACE_TLS_SERVER_NAME, MILLRACE_SASL_MECHANISM, MILLRACE_SASL_USERNAME, ` +
	`MILLRACE_SASL_PASSWORD_FILE), which sets its default: a flag on the command line wins, ` +
	`and so does a tls: or sasl: section in the --config of tail, beacon, otlp and sink. ` +
	passwordEnv + ` is the SASL password (or --sasl-password-file).`

// clientFlags are the root's persistent flags that say how to reach and
// authenticate to the brokers; every client command inherits them.
type clientFlags struct {
	fs *pflag.FlagSet

	brokers          string
	tls              bool
	tlsCA            string
	tlsCert          string
	tlsKey           string
	tlsServerName    string
	saslMechanism    string
	saslUsername     string
	saslPasswordFile string
	// saslPassword comes from passwordEnv only.
	saslPassword string

	// envErr reports an environment variable that is not a valid value of
	// its flag; commands fail with it before they run.
	envErr error
}

// newClientFlags defines the client flags on fs (the root's persistent
// flags) with the environment's values as their defaults.
func newClientFlags(fs *pflag.FlagSet) *clientFlags {
	c := &clientFlags{fs: fs}
	fs.StringVarP(&c.brokers, "brokers", "b", defaultBrokers, "seed brokers, comma-separated")
	fs.BoolVar(&c.tls, "tls", false, "connect with TLS, verifying the brokers' certificates against the system's roots (or --tls-ca)")
	fs.StringVar(&c.tlsCA, "tls-ca", "", "PEM `file` of the certificate authorities that sign the brokers' certificates (implies --tls)")
	fs.StringVar(&c.tlsCert, "tls-cert", "", "PEM `file` of the client's certificate chain, for brokers that require client certificates (implies --tls)")
	fs.StringVar(&c.tlsKey, "tls-key", "", "PEM `file` of the client certificate's private key (default: read from --tls-cert)")
	fs.StringVar(&c.tlsServerName, "tls-server-name", "", "`name` the brokers' certificates must carry (default: the host dialled; implies --tls)")
	fs.StringVar(&c.saslMechanism, "sasl-mechanism", "", "authenticate with SASL: "+strings.Join(clientauth.Mechanisms, ", "))
	fs.StringVar(&c.saslUsername, "sasl-username", "", "SASL user `name`")
	fs.StringVar(&c.saslPasswordFile, "sasl-password-file", "", "`file` holding the SASL password (or "+passwordEnv+"; there is no password flag)")
	fs.VisitAll(func(f *pflag.Flag) {
		name := envName(f.Name)
		v := os.Getenv(name)
		if v == "" {
			return
		}
		if err := f.Value.Set(v); err != nil {
			if c.envErr == nil {
				c.envErr = fmt.Errorf("%s=%q: %v", name, v, err)
			}
			return
		}
		f.DefValue = f.Value.String()
	})
	c.saslPassword = os.Getenv(passwordEnv)
	return c
}

// envName is the environment variable of a client flag: tls-ca is
// MILLRACE_TLS_CA.
func envName(flag string) string {
	return "MILLRACE_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// seeds are the brokers of -b.
func (c *clientFlags) seeds() []string { return seeds(c.brokers) }

// brokersGiven reports whether -b was on the command line, where it wins
// over a --config file's brokers.
func (c *clientFlags) brokersGiven() bool { return c.fs.Changed("brokers") }

func (c *clientFlags) changed(names ...string) bool {
	for _, n := range names {
		if c.fs.Changed(n) {
			return true
		}
	}
	return false
}

// settings are the TLS and SASL settings the flags and the environment
// give; the zero value when they give none.
func (c *clientFlags) settings() (clientauth.Settings, error) {
	var s clientauth.Settings
	if c.tls || c.tlsCA != "" || c.tlsCert != "" || c.tlsKey != "" || c.tlsServerName != "" {
		s.TLS = &clientauth.TLS{CA: c.tlsCA, Cert: c.tlsCert, Key: c.tlsKey, ServerName: c.tlsServerName}
	}
	if c.saslMechanism != "" || c.saslUsername != "" || c.saslPasswordFile != "" {
		switch {
		case c.saslMechanism == "":
			return s, usageError("--sasl-username and --sasl-password-file need --sasl-mechanism (%s)", strings.Join(clientauth.Mechanisms, ", "))
		case c.saslPasswordFile == "" && c.saslPassword == "":
			return s, usageError("--sasl-mechanism needs a password: --sasl-password-file FILE or %s", passwordEnv)
		case c.saslPasswordFile != "" && c.saslPassword != "":
			return s, usageError("the SASL password is given twice, by --sasl-password-file and %s: give one", passwordEnv)
		}
		s.SASL = &clientauth.SASL{Mechanism: strings.ToUpper(c.saslMechanism), Username: c.saslUsername,
			Password: c.saslPassword, PasswordFile: c.saslPasswordFile}
	}
	if err := s.Validate(); err != nil {
		return s, usageError("%v", err)
	}
	return s, nil
}

// applyTo sets a component's security settings from the flags. A section
// given on the command line replaces the --config file's, as -b replaces
// its brokers; one from the environment only fills a section the file
// leaves out.
func (c *clientFlags) applyTo(dst *clientauth.Settings) error {
	s, err := c.settings()
	if err != nil {
		return err
	}
	if s.TLS != nil && (dst.TLS == nil || c.changed("tls", "tls-ca", "tls-cert", "tls-key", "tls-server-name")) {
		dst.TLS = s.TLS
	}
	if s.SASL != nil && (dst.SASL == nil || c.changed("sasl-mechanism", "sasl-username", "sasl-password-file")) {
		dst.SASL = s.SASL
	}
	return nil
}
