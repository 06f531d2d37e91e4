package appliance

import (
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"millrace/broker"
	"millrace/broker/acl"
	"millrace/broker/coord/embedded"
	"millrace/broker/users"
	"millrace/internal/certs"
	"millrace/internal/clientauth"
)

// Secure mode (security: on) keeps its material in <data>/security:
//
//	ca.pem, ca-key.pem  the local CA (internal/certs); clients trust ca.pem
//	broker.pem          the broker's PEM keystore (key, certificate, CA)
//	<user>.password     a SCRAM-SHA-512 user's password, one per user below
//
// The directory is mode 0700 and every key and password file 0600. All of it
// is made on the first start and reused on every later one; a directory that
// holds only part of the CA and passwords is refused rather than completed,
// since new ones would silently lock out every client that has the old.
const (
	// SecurityDirName is secure mode's directory inside the data directory.
	SecurityDirName = "security"
	// BrokerKeystoreFile is the broker's keystore in that directory.
	BrokerKeystoreFile = "broker.pem"
	// PasswordFileSuffix ends each user's password file name.
	PasswordFileSuffix = ".password"
	// SecureMechanism is the one SASL mechanism secure mode enables.
	SecureMechanism = users.SCRAMSHA512
	// secureListenerName names the broker's one listener in secure mode.
	secureListenerName = "SASL_SSL"
	// passwordBytes of crypto/rand make a password (hex in the file).
	passwordBytes = 24
)

// The users secure mode makes. admin is the one super user; each other is
// one component of the appliance with only the ACLs it needs (secureACLs).
const (
	AdminUser   = "admin"
	TailUser    = "millrace-tail"
	BeaconUser  = "millrace-beacon"
	SinkUser    = "millrace-sink"
	ConsoleUser = "millrace-console"
)

// SecureUsers are the users secure mode makes, admin first. The set does not
// depend on the configuration, so adding a tail or a sink later never
// leaves the directory incomplete.
var SecureUsers = []string{AdminUser, TailUser, BeaconUser, SinkUser, ConsoleUser}

// secureOwnedSettings are the broker settings secure mode sets; giving them
// in broker.settings as well is refused rather than silently overridden.
var secureOwnedSettings = []string{
	"listeners", "advertised.listeners", "listener.security.protocol.map", "inter.broker.listener.name",
	"ssl.keystore.type", "ssl.keystore.location", "ssl.truststore.type", "ssl.truststore.location", "ssl.client.auth",
	"sasl.enabled.mechanisms", "authorizer.class.name", "super.users", "allow.everyone.if.no.acl.found",
	"sasl.mechanism.inter.broker.protocol", "millrace.inter.broker.sasl.username", "millrace.inter.broker.sasl.password.file",
	"schema.registry.authentication.method", "schema.registry.ssl.keystore.location",
}

// secureMaterial is secure mode's files, made or loaded.
type secureMaterial struct {
	dir       string
	passwords map[string]string // by user; never logged or printed
	created   bool              // made by this start
}

func (m secureMaterial) caFile() string       { return filepath.Join(m.dir, certs.CAFile) }
func (m secureMaterial) keystoreFile() string { return filepath.Join(m.dir, BrokerKeystoreFile) }
func (m secureMaterial) passwordFile(user string) string {
	return filepath.Join(m.dir, user+PasswordFileSuffix)
}

// clientSettings are the tls: and sasl: settings of a client authenticating
// as user.
func (m secureMaterial) clientSettings(user string) clientauth.Settings {
	return clientauth.Settings{
		TLS:  &clientauth.TLS{CA: m.caFile()},
		SASL: &clientauth.SASL{Mechanism: SecureMechanism, Username: user, PasswordFile: m.passwordFile(user)},
	}
}

// ensureSecureMaterial makes secure mode's files in dir on first start, or
// loads them, and issues the broker's certificate for hosts when it is
// missing. A keystore that does not cover hosts is refused: clients would
// fail to verify the broker.
func ensureSecureMaterial(dir string, hosts []string) (secureMaterial, error) {
	m := secureMaterial{dir: dir, passwords: map[string]string{}}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return m, fmt.Errorf("security: %w", err)
	}
	// The directory holds the CA key and every password: keep others out
	// even if it was made by hand with a looser mode.
	if err := os.Chmod(dir, 0o700); err != nil {
		return m, fmt.Errorf("security: %w", err)
	}
	required := []string{certs.CAFile, certs.CAKeyFile}
	for _, u := range SecureUsers {
		required = append(required, u+PasswordFileSuffix)
	}
	var present, missing []string
	for _, name := range required {
		switch _, err := os.Stat(filepath.Join(dir, name)); {
		case err == nil:
			present = append(present, name)
		case errors.Is(err, fs.ErrNotExist):
			missing = append(missing, name)
		default:
			return m, fmt.Errorf("security: %w", err)
		}
	}
	if len(present) > 0 && len(missing) > 0 {
		return m, fmt.Errorf("security: %s holds only part of the CA and passwords (missing %s): restore them, or remove the directory to make a new CA and new passwords (every client must then take the new ones)",
			dir, strings.Join(missing, ", "))
	}
	m.created = len(present) == 0
	if m.created {
		for _, u := range SecureUsers {
			if err := newPasswordFile(m.passwordFile(u)); err != nil {
				return m, err
			}
		}
	}
	ca, err := certs.NewCA(dir, "millrace local CA")
	if err != nil {
		return m, fmt.Errorf("security: %w", err)
	}
	for _, u := range SecureUsers {
		pw, err := readPassword(m.passwordFile(u))
		if err != nil {
			return m, err
		}
		m.passwords[u] = pw
	}
	if err := ensureBrokerKeystore(ca, m.keystoreFile(), hosts); err != nil {
		return m, err
	}
	return m, nil
}

// prepareSecure makes or loads secure mode's material for cfg and points
// the admin's, the beacon's and the sinks' client settings at it (the
// tailers' and the console's are made where they are used).
func prepareSecure(cfg *Config, logger *slog.Logger) (*secureMaterial, error) {
	hosts, err := brokerHosts(cfg.Broker.Listen)
	if err != nil {
		return nil, err
	}
	if cfg.SchemaRegistry.On() {
		// The schema registry serves HTTPS with the same certificate.
		more, err := brokerHosts(cfg.SchemaRegistry.Listen)
		if err != nil {
			return nil, err // Validate reported it
		}
		for _, h := range more {
			if !slices.Contains(hosts, h) {
				hosts = append(hosts, h)
			}
		}
	}
	m, err := ensureSecureMaterial(filepath.Join(cfg.Data, SecurityDirName), hosts)
	if err != nil {
		return nil, err
	}
	cfg.Security = m.clientSettings(AdminUser)
	cfg.Ship.Security = m.clientSettings(BeaconUser)
	for i := range cfg.Sinks {
		cfg.Sinks[i].Security = m.clientSettings(SinkUser)
	}
	logger.Info("security on: SASL_SSL with SCRAM-SHA-512 and ACLs; CA and passwords in the security directory",
		"dir", m.dir, "created", m.created)
	return &m, nil
}

// newPasswordFile writes a new random password to path, mode 0600, failing
// if the file exists.
func newPasswordFile(path string) error {
	b := make([]byte, passwordBytes)
	if _, err := rand.Read(b); err != nil {
		return fmt.Errorf("security: password: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("security: %w", err)
	}
	_, err = f.WriteString(hex.EncodeToString(b) + "\n")
	if err == nil {
		err = f.Sync()
	}
	if closeErr := f.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("security: writing %s: %w", path, err)
	}
	return nil
}

// readPassword reads a password file as clientauth does: the trailing
// newline is not part of the password.
func readPassword(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("security: %w", err)
	}
	pw := strings.TrimRight(string(b), "\r\n")
	if pw == "" {
		return "", fmt.Errorf("security: %s is empty", path)
	}
	return pw, nil
}

// ensureBrokerKeystore issues the broker's certificate for hosts into path
// when there is none, and checks an existing one: signed by ca and valid
// for every host.
func ensureBrokerKeystore(ca *certs.CA, path string, hosts []string) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		opts := certs.Options{CommonName: "millrace broker", Usage: certs.Server | certs.Client}
		for _, h := range hosts {
			if ip := net.ParseIP(h); ip != nil {
				opts.IPs = append(opts.IPs, ip)
			} else {
				opts.DNSNames = append(opts.DNSNames, h)
			}
		}
		if _, err := ca.Issue(path, opts); err != nil {
			return fmt.Errorf("security: %w", err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("security: %w", err)
	}
	leaf, err := keystoreLeaf(data)
	if err != nil {
		return fmt.Errorf("security: %s: %w", path, err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Certificate())
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		return fmt.Errorf("security: %s is not a server certificate of the CA in %s (%v): remove it to have the CA issue a new one", path, filepath.Dir(path), err)
	}
	for _, h := range hosts {
		if err := leaf.VerifyHostname(h); err != nil {
			return fmt.Errorf("security: %s is not valid for %s (broker.listen changed?): remove it to have the CA issue a new one", path, h)
		}
	}
	return nil
}

// keystoreLeaf is the first certificate of a PEM keystore.
func keystoreLeaf(data []byte) (*x509.Certificate, error) {
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return nil, errors.New("holds no certificate")
		}
		if block.Type == "CERTIFICATE" {
			return x509.ParseCertificate(block.Bytes)
		}
	}
}

// brokerHosts are the names the broker's certificate must carry for a
// listener at listen: localhost and 127.0.0.1, which the appliance's own
// clients dial and a wildcard bind advertises, and the listen host unless it
// is a wildcard.
func brokerHosts(listen string) ([]string, error) {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, fmt.Errorf("broker.listen %q: %w", listen, err)
	}
	hosts := []string{"localhost", "127.0.0.1"}
	if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) && !slices.Contains(hosts, host) {
		hosts = append(hosts, host)
	}
	return hosts, nil
}

// secureBrokerConfig turns bc into secure mode's broker: one SASL_SSL
// listener at listen with SCRAM-SHA-512 only, the authorizer on with admin
// as its super user and nothing allowed without an ACL. A single broker
// replicates from no one; its inter-broker user (admin) is what the schema
// registry it hosts writes as, and the registry takes basic auth against
// the broker's users.
func secureBrokerConfig(bc *broker.Config, m secureMaterial, listen string) error {
	for name, value := range map[string]string{
		"listeners":                      secureListenerName + "://" + listen,
		"ssl.keystore.location":          m.keystoreFile(),
		"sasl.enabled.mechanisms":        SecureMechanism,
		"authorizer.class.name":          "millrace",
		"super.users":                    "User:" + AdminUser,
		"allow.everyone.if.no.acl.found": "false",
		// The schema registry writes its topic through the broker's
		// listener as admin, trusting the local CA, and checks its
		// clients' passwords against the same users (basic auth); only
		// admin may change it.
		"ssl.truststore.location":                  m.caFile(),
		"sasl.mechanism.inter.broker.protocol":     SecureMechanism,
		"millrace.inter.broker.sasl.username":      AdminUser,
		"millrace.inter.broker.sasl.password.file": m.passwordFile(AdminUser),
		"schema.registry.authentication.method":    "BASIC",
	} {
		if err := bc.Set(name, value); err != nil {
			return fmt.Errorf("security: broker setting %s: %w", name, err)
		}
	}
	return nil
}

// provisionStore writes secure mode's users and ACLs into the embedded
// broker's coordination store before the broker opens it: a credential is
// replaced only when it does not match the password file, and each
// component user's ACLs become exactly want (ACLs of a topic or group no
// longer configured are removed). Running it again changes nothing.
func provisionStore(dir string, m secureMaterial, want []acl.Binding, logger *slog.Logger) (err error) {
	server, err := embedded.Open(dir, logger)
	if err != nil {
		return fmt.Errorf("security: opening the store in %s: %w", dir, err)
	}
	defer func() { err = errors.Join(err, server.Close()) }()
	store, err := server.Session()
	if err != nil {
		return fmt.Errorf("security: %w", err)
	}
	defer func() { err = errors.Join(err, store.Close()) }()
	for _, u := range SecureUsers {
		creds, err := users.Get(store, u)
		if err != nil && !errors.Is(err, users.ErrNoUser) {
			return fmt.Errorf("security: user %s: %w", u, err)
		}
		if c, ok := creds[SecureMechanism]; ok && c.Verify(m.passwords[u]) {
			continue
		}
		c, err := users.NewCredential(SecureMechanism, m.passwords[u], users.MinIterations)
		if err != nil {
			return fmt.Errorf("security: user %s: %w", u, err)
		}
		if err := users.Upsert(store, u, c); err != nil {
			return fmt.Errorf("security: user %s: %w", u, err)
		}
	}
	cache, err := acl.OpenCache(store, logger)
	if err != nil {
		return fmt.Errorf("security: reading ACLs: %w", err)
	}
	snap := cache.Snapshot()
	if err := cache.Close(); err != nil {
		return fmt.Errorf("security: %w", err)
	}
	var stale []acl.Filter
	for _, u := range SecureUsers[1:] {
		principal := "User:" + u
		for _, b := range snap.Select(acl.Filter{Type: acl.AnyResource, PatternType: acl.AnyPattern, Principal: &principal,
			Operation: acl.AnyOperation, Permission: acl.AnyPermission}) {
			if !slices.Contains(want, b) {
				stale = append(stale, exactFilter(b))
			}
		}
	}
	if len(stale) > 0 {
		_, errs := acl.Remove(store, stale)
		if err := errors.Join(errs...); err != nil {
			return fmt.Errorf("security: removing ACLs: %w", err)
		}
	}
	if err := errors.Join(acl.Add(store, want)...); err != nil {
		return fmt.Errorf("security: adding ACLs: %w", err)
	}
	return nil
}

// exactFilter selects b and nothing else.
func exactFilter(b acl.Binding) acl.Filter {
	name, principal, host := b.Pattern.Name, b.Entry.Principal, b.Entry.Host
	return acl.Filter{Type: b.Pattern.Type, Name: &name, PatternType: b.Pattern.PatternType,
		Principal: &principal, Host: &host, Operation: b.Entry.Operation, Permission: b.Entry.Permission}
}

// secureACLs are the least-privilege ACLs of secure mode's component users
// for c (with its defaults applied); admin is a super user and needs none.
//
//   - millrace-tail writes its inputs' topics and the audit topic.
//   - millrace-beacon writes the clicks and metrics topics and their
//     dead-letter topics, the OTLP receiver's topics, the ops metrics
//     topic and the audit topic.
//   - millrace-sink reads its topics and its groups, and creates and writes
//     each topic's <topic>.dlq; it writes, reads back and may create the
//     audit topic (the sink ensures both kinds exist at start).
//   - millrace-console describes the cluster, every topic and every group,
//     and reads the ops metrics and audit topics.
//
// Each of the three producing users also has IdempotentWrite on the
// cluster: their producers are idempotent, and InitProducerId checks it
// first (Write on any topic would do since KIP-679, but only after a
// logged denial, and Kafka before 3.0 requires it).
func secureACLs(c Config) []acl.Binding {
	var out []acl.Binding
	add := func(user string, typ acl.ResourceType, name string, ops ...acl.Operation) {
		if name == "" {
			return
		}
		for _, op := range ops {
			b := acl.Binding{
				Pattern: acl.Pattern{Type: typ, Name: name, PatternType: acl.Literal},
				Entry:   acl.Entry{Principal: "User:" + user, Host: acl.Wildcard, Operation: op, Permission: acl.Allow},
			}
			if !slices.Contains(out, b) {
				out = append(out, b)
			}
		}
	}
	idempotent := func(user string) { add(user, acl.Cluster, acl.ClusterName, acl.IdempotentWrite) }
	audit := ""
	if c.Audit.On() {
		audit = c.Audit.Topic
	}
	for _, t := range c.Tail {
		add(TailUser, acl.Topic, t.Topic, acl.Write)
		add(TailUser, acl.Topic, audit, acl.Write)
		idempotent(TailUser)
	}
	if c.Beacon != nil {
		b := c.Beacon.WithDefaults()
		for _, t := range []string{b.Topic, b.DLQTopic, b.MetricsTopic, b.MetricsDLQTopic} {
			add(BeaconUser, acl.Topic, t, acl.Write)
		}
		add(BeaconUser, acl.Topic, audit, acl.Write)
		idempotent(BeaconUser)
		// The console charts the posted samples on its metrics page.
		add(ConsoleUser, acl.Topic, b.MetricsTopic, acl.Read)
	}
	if t := c.syslogTopic(); t != "" {
		// The syslog receiver produces through the beacon's producer.
		add(BeaconUser, acl.Topic, t, acl.Write)
		add(BeaconUser, acl.Topic, audit, acl.Write)
		idempotent(BeaconUser)
	}
	// The OTLP receiver produces through the beacon's producer.
	for _, t := range c.otlpTopics() {
		add(BeaconUser, acl.Topic, t, acl.Write)
		add(BeaconUser, acl.Topic, audit, acl.Write)
		idempotent(BeaconUser)
	}
	if c.OpsMetrics.Interval > 0 {
		add(BeaconUser, acl.Topic, c.OpsMetrics.Topic, acl.Write)
		add(BeaconUser, acl.Topic, audit, acl.Write)
		idempotent(BeaconUser)
	}
	for _, s := range c.Sinks {
		for _, t := range s.Topics {
			add(SinkUser, acl.Topic, t, acl.Read)
			add(SinkUser, acl.Topic, t+".dlq", acl.Create, acl.Write)
		}
		add(SinkUser, acl.Group, s.Group, acl.Read)
		add(SinkUser, acl.Topic, audit, acl.Create, acl.Write, acl.Read)
		idempotent(SinkUser)
	}
	add(ConsoleUser, acl.Cluster, acl.ClusterName, acl.Describe)
	add(ConsoleUser, acl.Topic, acl.Wildcard, acl.Describe)
	add(ConsoleUser, acl.Group, acl.Wildcard, acl.Describe)
	add(ConsoleUser, acl.Topic, c.OpsMetrics.Topic, acl.Read)
	add(ConsoleUser, acl.Topic, audit, acl.Read)
	return out
}

// dialable is addr with a wildcard host replaced by 127.0.0.1, an address
// the broker's certificate names (brokerHosts).
func dialable(addr net.Addr) string {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok || !tcp.IP.IsUnspecified() {
		return addr.String()
	}
	return net.JoinHostPort("127.0.0.1", fmt.Sprint(tcp.Port))
}

// SecureClient is what a user needs to connect to the secured broker as
// admin. The password stays in its file.
type SecureClient struct {
	// Bootstrap is the broker's address.
	Bootstrap string
	// CAFile is the CA certificate clients verify the broker with.
	CAFile string
	// Mechanism is the SASL mechanism (SCRAM-SHA-512).
	Mechanism string
	// Username is the super user, admin.
	Username string
	// PasswordFile holds admin's password.
	PasswordFile string
	// Created reports whether this start made the CA and passwords.
	Created bool
}

// SecureClient describes how to connect as admin, with absolute paths;
// false when security is off.
func (a *Appliance) SecureClient() (SecureClient, bool) {
	if a.secure == nil || len(a.brokers) == 0 {
		return SecureClient{}, false
	}
	abs := func(p string) string {
		if q, err := filepath.Abs(p); err == nil {
			return q
		}
		return p
	}
	return SecureClient{
		Bootstrap:    a.brokers[0],
		CAFile:       abs(a.secure.caFile()),
		Mechanism:    SecureMechanism,
		Username:     AdminUser,
		PasswordFile: abs(a.secure.passwordFile(AdminUser)),
		Created:      a.secure.created,
	}, true
}
