// Package clientauth holds the TLS and SASL settings of millrace's own Kafka
// clients (agents, sinks, the CLI, the console) and turns them into franz-go
// client options, so every component is configured the same way.
package clientauth

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// Settings are a client's security settings; the zero value is PLAINTEXT
// with no authentication.
type Settings struct {
	// TLS, when set, connects with TLS.
	TLS *TLS `yaml:"tls"`
	// SASL, when set, authenticates with SASL.
	SASL *SASL `yaml:"sasl"`
}

// TLS are the settings of a TLS client connection. With none of them set,
// TLS still applies, verified against the system's roots.
type TLS struct {
	// CA is a PEM file of the certificate authorities that sign the
	// brokers' certificates; empty uses the system's roots.
	CA string `yaml:"ca"`
	// Cert and Key are PEM files of the client's certificate chain and
	// private key, for brokers that require client certificates
	// (ssl.client.auth=required); both or neither. Key may be empty when
	// Cert holds the key too.
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
	// ServerName is the name the broker's certificate must carry; empty
	// uses the host of the address dialled.
	ServerName string `yaml:"server_name"`
}

// SASL are the settings of SASL authentication.
type SASL struct {
	// Mechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.
	Mechanism string `yaml:"mechanism"`
	// Username is the user to authenticate as.
	Username string `yaml:"username"`
	// Password is the password; PasswordFile names a file holding it
	// instead (its trailing newline ignored). Exactly one is set.
	Password     string `yaml:"password"`
	PasswordFile string `yaml:"password_file"`
}

// IsZero reports whether no security is configured (PLAINTEXT).
func (s Settings) IsZero() bool { return s.TLS == nil && s.SASL == nil }

// Inherit returns s with its unset parts taken from parent: a component's
// own tls: or sasl: wins, the other comes from the settings around it. So
// one CA can be given once while every component authenticates as a user
// of its own.
func (s Settings) Inherit(parent Settings) Settings {
	if s.TLS == nil {
		s.TLS = parent.TLS
	}
	if s.SASL == nil {
		s.SASL = parent.SASL
	}
	return s
}

// Mechanisms are the SASL mechanisms millrace serves and uses, in Kafka's
// spelling.
var Mechanisms = []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}

// Validate reports settings that cannot work, before anything connects.
func (s Settings) Validate() error {
	var errs []error
	if t := s.TLS; t != nil && t.Key != "" && t.Cert == "" {
		errs = append(errs, errors.New("tls: key is set without cert"))
	}
	if a := s.SASL; a != nil {
		if !validMechanism(a.Mechanism) {
			errs = append(errs, fmt.Errorf("sasl: mechanism %q is not one of %s", a.Mechanism, strings.Join(Mechanisms, ", ")))
		}
		if a.Username == "" {
			errs = append(errs, errors.New("sasl: username is empty"))
		}
		if (a.Password == "") == (a.PasswordFile == "") {
			errs = append(errs, errors.New("sasl: set exactly one of password and password_file"))
		}
	}
	return errors.Join(errs...)
}

func validMechanism(m string) bool {
	for _, v := range Mechanisms {
		if m == v {
			return true
		}
	}
	return false
}

// Opts returns the franz-go options that apply the settings: none for the
// zero value. Files are read now, so a missing one is an error here.
func (s Settings) Opts() ([]kgo.Opt, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	var opts []kgo.Opt
	if s.TLS != nil {
		cfg, err := s.TLS.Config()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	}
	if s.SASL != nil {
		m, err := s.SASL.Authenticator()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.SASL(m))
	}
	return opts, nil
}

// Config builds the crypto/tls client configuration.
func (t TLS) Config() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	if t.CA != "" {
		pem, err := os.ReadFile(t.CA)
		if err != nil {
			return nil, fmt.Errorf("tls: reading the CA file: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls: %s holds no PEM certificate", t.CA)
		}
	}
	if t.Cert != "" {
		key := t.Key
		if key == "" {
			key = t.Cert
		}
		cert, err := tls.LoadX509KeyPair(t.Cert, key)
		if err != nil {
			return nil, fmt.Errorf("tls: loading the client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// Secret returns the password, read from PasswordFile when that is set.
func (a SASL) Secret() (string, error) {
	if a.PasswordFile == "" {
		return a.Password, nil
	}
	b, err := os.ReadFile(a.PasswordFile)
	if err != nil {
		return "", fmt.Errorf("sasl: reading the password file: %w", err)
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

// Authenticator returns the franz-go SASL mechanism that authenticates as the user.
func (a SASL) Authenticator() (sasl.Mechanism, error) {
	pass, err := a.Secret()
	if err != nil {
		return nil, err
	}
	switch a.Mechanism {
	case "PLAIN":
		return plain.Auth{User: a.Username, Pass: pass}.AsMechanism(), nil
	case "SCRAM-SHA-256":
		return scram.Auth{User: a.Username, Pass: pass}.AsSha256Mechanism(), nil
	case "SCRAM-SHA-512":
		return scram.Auth{User: a.Username, Pass: pass}.AsSha512Mechanism(), nil
	}
	return nil, fmt.Errorf("sasl: mechanism %q is not one of %s", a.Mechanism, strings.Join(Mechanisms, ", "))
}
