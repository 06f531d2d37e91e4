package kafka

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"millrace/broker/users"
	"millrace/internal/settings"
)

// SASL settings of the broker, Kafka's names. They apply to listeners
// whose security protocol is SASL_PLAINTEXT or SASL_SSL; the inter-broker
// ones to the connections this broker opens to the others
// (broker/interbroker).

// mechanismPlain is SASL PLAIN (RFC 4616). The SCRAM mechanisms are
// users.SCRAMSHA256 and users.SCRAMSHA512.
const mechanismPlain = "PLAIN"

// saslMechanisms are the mechanisms served, in Kafka's spelling.
var saslMechanisms = []string{mechanismPlain, users.SCRAMSHA256, users.SCRAMSHA512}

// SASLConfig are the SASL settings.
type SASLConfig struct {
	// EnabledMechanisms (sasl.enabled.mechanisms, default
	// "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512") are the mechanisms a client may
	// pick in SaslHandshake. PLAIN checks the password against the user's
	// stored SCRAM credential, so it needs no password store of its own;
	// it sends the password itself, so enable it only over TLS
	// (SASL_SSL) outside tests.
	EnabledMechanisms []string
	// ConnectionsMaxReauth (connections.max.reauth.ms, default 0 = never,
	// KIP-368) is the longest an authentication holds. When set, clients
	// are told the session lifetime (SaslAuthenticate v1+) and must
	// authenticate again, as the same user, before it ends: a connection
	// whose session ended is closed at its next request. A deleted user or
	// changed password then locks a client out within this time.
	ConnectionsMaxReauth time.Duration
	// FailedAuthenticationDelay (connection.failed.authentication.delay.ms,
	// default 100, Kafka's) delays the answer to a failed authentication,
	// slowing password guessing. It must be less than
	// connections.max.idle.ms.
	FailedAuthenticationDelay time.Duration
	// FailedAuthenticationRatePerIP
	// (millrace.sasl.failed.authentication.rate.per.ip, default 10; Kafka
	// has none) is how many password checks that fail one client IP may
	// cause per second, sustained; FailedAuthenticationBurst
	// (millrace.sasl.failed.authentication.burst, default 20) how many in a
	// burst. Over it a login fails without the password being checked.
	// The delay above is per connection, so without this a client opening
	// many connections at once could make the broker run PBKDF2 (a PLAIN
	// login) as fast as its CPU allows. 0 = no limit.
	FailedAuthenticationRatePerIP int
	// FailedAuthenticationRatePerUser
	// (millrace.sasl.failed.authentication.rate.per.user, default 10) is
	// the same per user that exists, whatever the IP: guessing one user's
	// password from many addresses is limited too. Logins verified moments
	// ago (PlainCacheTTL) still succeed. 0 = no limit.
	FailedAuthenticationRatePerUser int
	// FailedAuthenticationBurst: see FailedAuthenticationRatePerIP.
	FailedAuthenticationBurst int
	// PlainCacheTTL (millrace.sasl.plain.cache.ms, default 60000; Kafka has
	// none) is how long a verified PLAIN password is remembered (as a keyed
	// hash, never the password), so that a client's next connections and
	// re-authentications skip PBKDF2; a changed password or deleted user
	// ends it at once. 0 = every PLAIN login runs PBKDF2.
	PlainCacheTTL time.Duration
	// ServerMaxReceiveSize (sasl.server.max.receive.size, default 524288,
	// Kafka's) is the largest request frame read on a SASL listener before
	// the connection has authenticated; a larger size prefix closes the
	// connection before anything is read or decoded. Without it, anyone
	// who can reach the port could have socket.request.max.bytes read and
	// decoded per request without a password. SASL messages themselves
	// are bounded far lower (16 KiB).
	ServerMaxReceiveSize int32
	// InterBrokerMechanism (sasl.mechanism.inter.broker.protocol, default
	// SCRAM-SHA-512; Kafka's is GSSAPI, which millrace does not serve) is
	// the mechanism this broker authenticates with to the other brokers'
	// SASL listeners.
	InterBrokerMechanism string
	// InterBrokerUsername (millrace.inter.broker.sasl.username, default
	// empty = inter-broker connections do not authenticate) is the user this
	// broker authenticates as; Kafka puts it in the listener's JAAS
	// config. Its principal (User:<name>) needs ClusterAction when ACLs
	// are on, or belongs in super.users.
	InterBrokerUsername string
	// InterBrokerPasswordFile (millrace.inter.broker.sasl.password.file,
	// default empty) is a file holding that user's password (a trailing
	// newline is ignored); required with InterBrokerUsername.
	InterBrokerPasswordFile string
}

func defaultSASLConfig() SASLConfig {
	return SASLConfig{
		EnabledMechanisms:               slices.Clone(saslMechanisms),
		FailedAuthenticationDelay:       100 * time.Millisecond,
		FailedAuthenticationRatePerIP:   10,
		FailedAuthenticationRatePerUser: 10,
		FailedAuthenticationBurst:       20,
		PlainCacheTTL:                   time.Minute,
		ServerMaxReceiveSize:            524288,
		InterBrokerMechanism:            users.SCRAMSHA512,
	}
}

// validate reports impossible SASL settings; idle is
// connections.max.idle.ms.
func (s SASLConfig) validate(idle time.Duration) []error {
	var errs []error
	if len(s.EnabledMechanisms) == 0 {
		errs = append(errs, errors.New("sasl.enabled.mechanisms is empty: a SASL listener could authenticate no one"))
	}
	for _, m := range s.EnabledMechanisms {
		if !slices.Contains(saslMechanisms, m) {
			errs = append(errs, fmt.Errorf("sasl.enabled.mechanisms: %q is not one of %s", m, strings.Join(saslMechanisms, ", ")))
		}
	}
	if s.ConnectionsMaxReauth < 0 {
		errs = append(errs, fmt.Errorf("connections.max.reauth.ms %v must not be negative (0 turns re-authentication off)", s.ConnectionsMaxReauth))
	}
	if s.FailedAuthenticationDelay < 0 || s.FailedAuthenticationDelay >= idle {
		errs = append(errs, fmt.Errorf("connection.failed.authentication.delay.ms %v must be from 0 to less than connections.max.idle.ms %v", s.FailedAuthenticationDelay, idle))
	}
	if s.FailedAuthenticationRatePerIP < 0 || s.FailedAuthenticationRatePerUser < 0 {
		errs = append(errs, fmt.Errorf("millrace.sasl.failed.authentication.rate.per.ip %d and .per.user %d must not be negative (0 turns the limit off)", s.FailedAuthenticationRatePerIP, s.FailedAuthenticationRatePerUser))
	}
	if s.FailedAuthenticationBurst < 1 {
		errs = append(errs, fmt.Errorf("millrace.sasl.failed.authentication.burst %d must be at least 1: a smaller bucket could never let a password be checked", s.FailedAuthenticationBurst))
	}
	if s.PlainCacheTTL < 0 {
		errs = append(errs, fmt.Errorf("millrace.sasl.plain.cache.ms %v must not be negative (0 turns the cache off)", s.PlainCacheTTL))
	}
	if s.ServerMaxReceiveSize < requestHeaderMinBytes {
		errs = append(errs, fmt.Errorf("sasl.server.max.receive.size %d cannot hold a request header (%d bytes)", s.ServerMaxReceiveSize, requestHeaderMinBytes))
	}
	if !slices.Contains(saslMechanisms, s.InterBrokerMechanism) {
		errs = append(errs, fmt.Errorf("sasl.mechanism.inter.broker.protocol %q is not one of %s", s.InterBrokerMechanism, strings.Join(saslMechanisms, ", ")))
	}
	if (s.InterBrokerUsername == "") != (s.InterBrokerPasswordFile == "") {
		errs = append(errs, errors.New("millrace.inter.broker.sasl.username and millrace.inter.broker.sasl.password.file go together: set both or neither"))
	}
	if s.InterBrokerUsername != "" {
		if err := users.CheckName(s.InterBrokerUsername); err != nil {
			errs = append(errs, fmt.Errorf("millrace.inter.broker.sasl.username: %w", err))
		}
	}
	return errs
}

// saslSettings are the SASL settings, part of Settings.
var saslSettings = settings.NewList(settingError,
	settings.Setting[Config]{Name: "sasl.enabled.mechanisms", Type: settings.ListType, Doc: "mechanisms a client may pick on a SASL listener",
		Parse: func(c *Config, v string) error {
			var ms []string
			for m := range strings.SplitSeq(v, ",") {
				if m = strings.TrimSpace(m); m != "" {
					ms = append(ms, strings.ToUpper(m))
				}
			}
			c.SASL.EnabledMechanisms = ms
			return nil
		},
		Format: func(c Config) string { return strings.Join(c.SASL.EnabledMechanisms, ",") },
	},
	ms("connections.max.reauth.ms", "longest a SASL session lasts before the client re-authenticates (KIP-368); 0: forever", func(c *Config) *time.Duration { return &c.SASL.ConnectionsMaxReauth }),
	intMs("connection.failed.authentication.delay.ms", "wait before answering a failed authentication", func(c *Config) *time.Duration { return &c.SASL.FailedAuthenticationDelay }),
	integer("millrace.sasl.failed.authentication.rate.per.ip", settings.Int, "failed authentications a second from one IP address before they are refused", func(c *Config) *int { return &c.SASL.FailedAuthenticationRatePerIP }),
	integer("millrace.sasl.failed.authentication.rate.per.user", settings.Int, "failed authentications a second for one user before they are refused", func(c *Config) *int { return &c.SASL.FailedAuthenticationRatePerUser }),
	integer("millrace.sasl.failed.authentication.burst", settings.Int, "failed authentications allowed at once above those rates", func(c *Config) *int { return &c.SASL.FailedAuthenticationBurst }),
	ms("millrace.sasl.plain.cache.ms", "how long a PLAIN password check is remembered", func(c *Config) *time.Duration { return &c.SASL.PlainCacheTTL }),
	integer("sasl.server.max.receive.size", settings.Int, "largest SASL token accepted", func(c *Config) *int32 { return &c.SASL.ServerMaxReceiveSize }),
	settings.Str("sasl.mechanism.inter.broker.protocol", settings.String, "the mechanism brokers use with each other", func(c *Config) *string { return &c.SASL.InterBrokerMechanism }),
	settings.Str("millrace.inter.broker.sasl.username", settings.String, "the user brokers authenticate as with each other", func(c *Config) *string { return &c.SASL.InterBrokerUsername }),
	settings.Str("millrace.inter.broker.sasl.password.file", settings.String, "the file holding that user's password", func(c *Config) *string { return &c.SASL.InterBrokerPasswordFile }),
)
