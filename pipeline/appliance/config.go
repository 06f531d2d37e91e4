// Package appliance runs the whole millrace pipeline in one process — the
// broker, the beacon and metrics intake, the log tailers and the Parquet
// sinks — from one YAML file (`millrace up --config millrace.yaml`).
//
// Every section can instead point at an external cluster: with `brokers:`
// set, no broker is started and every part uses those brokers, so the same
// file drives one machine or a distributed deployment.
package appliance

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"time"

	"millrace/agents/beacon"
	"millrace/agents/ship"
	"millrace/agents/tail"
	"millrace/audit"
	"millrace/broker"
	"millrace/internal/clientauth"
	"millrace/internal/httpserver"
	"millrace/pipeline/monitor"
	"millrace/sinks/lake"
)

// Config is the appliance's YAML file. Zero values mean the defaults noted.
type Config struct {
	// Data is the directory for the embedded broker, agent checkpoints and
	// relative lake paths. Default ".millrace".
	Data string `yaml:"data"`
	// Brokers, when set, are an external cluster: no broker is started.
	Brokers []string `yaml:"brokers"`
	// Security is the TLS and SASL settings (tls:, sasl:; see package
	// clientauth) of every Kafka client the appliance runs: its topic
	// creation, the console and the audit. ship: and each sink may set
	// tls: or sasl: of their own; what they leave unset they take from
	// here. Default none: PLAINTEXT without authentication.
	Security clientauth.Settings `yaml:",inline"`
	// Secure (security: on) secures the embedded broker and every client
	// of it: on first start a local CA, the broker's certificate and
	// SCRAM-SHA-512 users with random passwords (admin, and one user per
	// component) are made in <data>/security and reused later; the broker
	// serves one SASL_SSL listener at broker.listen with ACLs on, each
	// component connects as its own user with least-privilege ACLs, and
	// the console and /metrics need the generated HTTP token unless
	// http.auth names credentials. It cannot be combined with brokers:,
	// tls:/sasl: settings, or broker.settings of listeners, SSL, SASL or
	// the authorizer, which it sets itself. Default off.
	Secure bool `yaml:"security"`
	// Broker is the embedded broker (used when Brokers is empty).
	Broker BrokerConfig `yaml:"broker"`
	// SchemaRegistry is the schema registry the embedded broker hosts
	// (Confluent's REST API; on by default). With brokers: there is none.
	SchemaRegistry SchemaRegistryConfig `yaml:"schema_registry"`
	// HTTP serves the beacon, the metrics intake, the demo page and the
	// console; /metrics has a listener of its own (http.metrics_listen).
	HTTP HTTPConfig `yaml:"http"`
	// Topics are created at start when missing.
	Topics []TopicConfig `yaml:"topics"`
	// Ship is the producer every agent shares (brokers are filled in).
	Ship ship.Config `yaml:"ship"`
	// Beacon is the click and metrics ingest; nil turns it off.
	Beacon *beacon.Config `yaml:"beacon"`
	// Syslog receives syslog over UDP, TCP and TLS (RFC 5424 and 3164)
	// into the topic "syslog"; on by default on 127.0.0.1:5514 (UDP and
	// TCP), off with syslog.enabled: false.
	Syslog SyslogConfig `yaml:"syslog"`
	// OTLP is the OpenTelemetry Protocol receiver (on by default, on
	// 127.0.0.1:4318 and 127.0.0.1:4317; see OTLPConfig).
	OTLP OTLPConfig `yaml:"otlp"`
	// Tail are the log inputs, each a tailer with its own topic and paths.
	Tail []TailConfig `yaml:"tail"`
	// TieredStorage keeps the closed segments of the topics up creates in
	// a sink's lake, under <out>/_tiered, and only the recent tail on the
	// embedded broker's disk (tiered_storage: enabled: true,
	// local_retention: 1h; see TieredStorageConfig). Default off.
	TieredStorage TieredStorageConfig `yaml:"tiered_storage"`
	// Sinks land topics as Parquet: in Apache Iceberg tables by default
	// (format: iceberg, see defaultFormat), or in Hive directories with
	// format: hive.
	Sinks []SinkConfig `yaml:"sinks"`
	// OpsMetrics publishes every component's metrics as metric-sample events.
	OpsMetrics OpsMetricsConfig `yaml:"ops_metrics"`
	// Demo writes a synthetic service log for the demo's tail input.
	Demo DemoConfig `yaml:"demo"`
	// Audit publishes the agents' counts of acknowledged events to
	// audit.topic (on by default; see package audit). Each tailer's
	// instance id is kept in its data directory; audit.instance, when set,
	// names the beacon (default: host name and http.listen).
	Audit audit.Config `yaml:"audit"`
	// Quotas are the client quotas up sets on its embedded broker for its
	// own sinks, console and agents (quotas.go); `quotas: off` sets none.
	// Default: the sinks fetch at most 64 MiB/s and take at most one
	// request handler's time (request_percentage 100), the console a
	// quarter of one; the agents have none.
	Quotas QuotasConfig `yaml:"quotas"`
}

// BrokerConfig is the embedded broker.
type BrokerConfig struct {
	// Listen is the Kafka protocol address. Default 127.0.0.1:9092.
	Listen string `yaml:"listen"`
	// Settings are broker settings by Kafka name (num.partitions, ...).
	Settings map[string]string `yaml:"settings"`
}

// SchemaRegistryConfig is the embedded broker's schema registry.
type SchemaRegistryConfig struct {
	// Enabled turns the registry on. Default true.
	Enabled *bool `yaml:"enabled"`
	// Listen is its address (Confluent's port). Default 127.0.0.1:8081.
	// With security: on it serves HTTPS with the broker's certificate,
	// needs HTTP basic auth as one of the broker's users, and only the
	// admin user may change it (others read).
	Listen string `yaml:"listen"`
}

// On reports whether the registry runs.
func (c SchemaRegistryConfig) On() bool { return c.Enabled == nil || *c.Enabled }

// HTTPConfig is the appliance's web server.
type HTTPConfig struct {
	// Listen is the address. Default 127.0.0.1:8090.
	Listen string `yaml:"listen"`
	// MetricsListen is the address of the Prometheus /metrics listener,
	// kept apart from Listen so that opening the ingest port to browsers
	// does not publish the appliance's internals. Default 127.0.0.1:8092.
	MetricsListen string `yaml:"metrics_listen"`
	// AuditInterval is how often the console reconciles _millrace.audit with
	// the sinks' outputs for its audit table and the
	// millrace_audit_unreconciled_hours gauge (each run reads the audit topic
	// and the footers of AuditSince). Default 1m, at least 10s; negative
	// turns it off. With audit.enabled false or no sinks there is no audit.
	AuditInterval time.Duration `yaml:"audit_interval"`
	// AuditSince is how far back the console audits. Default 24h, at least 1h.
	AuditSince time.Duration `yaml:"audit_since"`
	// Auth protects the console, /metrics and Prometheus remote write
	// (/api/v1/write) with a bearer token or basic-auth credentials; the
	// beacon's other routes, /healthz, /readyz and the demo page stay
	// public. Default: no authentication.
	Auth HTTPAuthConfig `yaml:"auth"`
	// TLS serves http.listen and http.metrics_listen over HTTPS from PEM
	// files (tls.cert, tls.key). Default: none, plain HTTP.
	TLS *httpserver.TLSConfig `yaml:"tls"`
}

// HTTPAuthConfig protects the appliance's private web routes.
type HTTPAuthConfig struct {
	// Token "generate" makes a random token (32 bytes from crypto/rand,
	// hex) on first start, keeps it in <data>/http-token with mode 0600,
	// reuses it on later starts, and prints the file and a console login
	// URL at start. Empty (the default) generates nothing; token_file and
	// basic_file then choose the credentials.
	Token string `yaml:"token"`
	// Inline: token_file (one bearer token) and basic_file (user:password
	// lines); see internal/httpserver.AuthConfig.
	httpserver.AuthConfig `yaml:",inline"`
}

// TokenGenerate is the value of http.auth.token that makes the appliance
// generate its token.
const TokenGenerate = "generate"

// On reports whether the private routes need credentials.
func (c HTTPAuthConfig) On() bool { return c.Token == TokenGenerate || c.AuthConfig.On() }

// TopicConfig is a topic to create at start.
type TopicConfig struct {
	Name              string            `yaml:"name"`
	Partitions        int32             `yaml:"partitions"`         // default 3
	ReplicationFactor int16             `yaml:"replication_factor"` // default 1
	Config            map[string]string `yaml:"config"`
}

// TailConfig is one log input: a name (for its checkpoint directory and
// metric labels) and the tailer's settings.
type TailConfig struct {
	Name string `yaml:"name"`
	// Inline: paths, topic, multiline and the rest of tail.Config.
	tail.Config `yaml:",inline"`
}

// SinkConfig is one Parquet sink: where it lands and the worker's settings.
type SinkConfig struct {
	Name string `yaml:"name"`
	// Out is file:///PATH, a relative path (under Data) or s3://BUCKET/PREFIX.
	Out string `yaml:"out"`
	// S3Endpoint and S3Region for s3:// outputs (credentials from
	// AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY).
	S3Endpoint string `yaml:"s3_endpoint"`
	S3Region   string `yaml:"s3_region"`
	// Inline: group, topics, schema, roll_rows, roll_age, ...
	lake.Config `yaml:",inline"`
}

// OpsMetricsConfig is the ops metrics publisher.
type OpsMetricsConfig struct {
	// Topic receives the samples. Default _millrace.metrics.
	Topic string `yaml:"topic"`
	// Interval between publications. Default 10s; negative turns it off.
	Interval time.Duration `yaml:"interval"`
}

// DemoConfig is the demo's synthetic log writer.
type DemoConfig struct {
	// WriteLog is a file the appliance appends a service-like log line to
	// every Interval; empty writes nothing.
	WriteLog string `yaml:"write_log"`
	// Interval between lines. Default 1s.
	Interval time.Duration `yaml:"interval"`
}

// Defaults.
const (
	DefaultData         = ".millrace"
	DefaultBrokerListen = "127.0.0.1:9092"
	DefaultHTTPListen   = "127.0.0.1:8090"
	// DefaultSchemaRegistryListen is Confluent's registry port, on
	// loopback.
	DefaultSchemaRegistryListen = "127.0.0.1:8081"
	// DefaultMetricsListen is loopback: a Prometheus on the same host
	// scrapes it; set http.metrics_listen to reach it from elsewhere.
	DefaultMetricsListen = "127.0.0.1:8092"
	DefaultOpsTopic      = "_millrace.metrics"
	DefaultOpsInterval   = 10 * time.Second
)

// withDefaults fills unset fields and resolves relative paths against Data.
func (c Config) withDefaults() Config {
	if c.Data == "" {
		c.Data = DefaultData
	}
	if c.Broker.Listen == "" {
		c.Broker.Listen = DefaultBrokerListen
	}
	if c.HTTP.Listen == "" {
		c.HTTP.Listen = DefaultHTTPListen
	}
	if c.SchemaRegistry.Listen == "" {
		c.SchemaRegistry.Listen = DefaultSchemaRegistryListen
	}
	if c.HTTP.MetricsListen == "" {
		c.HTTP.MetricsListen = DefaultMetricsListen
	}
	if c.HTTP.AuditInterval == 0 {
		c.HTTP.AuditInterval = monitor.DefaultAuditInterval
	}
	if c.HTTP.AuditSince == 0 {
		c.HTTP.AuditSince = monitor.DefaultAuditSince
	}
	if c.OpsMetrics.Topic == "" {
		c.OpsMetrics.Topic = DefaultOpsTopic
	}
	if c.OpsMetrics.Interval == 0 {
		c.OpsMetrics.Interval = DefaultOpsInterval
	}
	if c.Demo.Interval == 0 {
		c.Demo.Interval = time.Second
	}
	if c.TieredStorage.LocalRetention == 0 {
		c.TieredStorage.LocalRetention = DefaultLocalRetention
	}
	c.Audit = c.Audit.WithDefaults()
	c.Syslog = c.Syslog.withDefaults()
	if c.Secure && !c.HTTP.Auth.On() {
		c.HTTP.Auth.Token = TokenGenerate
	}
	c.Topics = append([]TopicConfig(nil), c.Topics...)
	for i := range c.Topics {
		if c.Topics[i].Partitions == 0 {
			c.Topics[i].Partitions = 3
		}
		if c.Topics[i].ReplicationFactor == 0 {
			c.Topics[i].ReplicationFactor = 1
		}
	}
	c.Tail = append([]TailConfig(nil), c.Tail...)
	for i := range c.Tail {
		if c.Tail[i].DataDir == "" {
			c.Tail[i].DataDir = filepath.Join(c.Data, "tail", c.Tail[i].Name)
		}
	}
	c.Ship.Security = c.Ship.Security.Inherit(c.Security)
	c.Sinks = append([]SinkConfig(nil), c.Sinks...)
	for i := range c.Sinks {
		s := &c.Sinks[i]
		s.Security = s.Security.Inherit(c.Security)
		if s.Out != "" && !strings.Contains(s.Out, "://") {
			s.Out = filepath.Join(c.Data, s.Out)
		}
		if s.Group == "" {
			s.Group = "millrace-sink-" + s.Name
		}
		s.Config = defaultFormat(s.Out, s.Config)
	}
	return c
}

// defaultFormat is lc with its format settled: a sink of `millrace up`
// lands Iceberg tables unless its config says `format: hive` (an Iceberg
// warehouse must be a directory, so an s3:// out stays Hive, as does a
// sink that sets timestamp_field, a setting of the Hive layout). Its tables'
// catalog is the default SQLite file in the out directory, and
// partition_by: day becomes the tables' day spec.
func defaultFormat(out string, lc lake.Config) lake.Config {
	if lc.Format != "" || strings.HasPrefix(out, "s3://") || lc.TimestampField != "" {
		return lc
	}
	lc.Format = lake.FormatIceberg
	if lc.PartitionBy == "day" && lc.Iceberg.Partition == "" {
		lc.Iceberg.Partition = "day"
	}
	lc.PartitionBy = ""
	return lc
}

// Validate rejects what cannot run, with a sentence per problem.
func (c Config) Validate() error {
	var errs []error
	if c.Secure {
		errs = append(errs, c.validateSecure()...)
	}
	if err := c.Security.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := ownSecurity(c.Ship.Security, c.Security).Validate(); err != nil {
		errs = append(errs, fmt.Errorf("ship: %w", err))
	}
	for i, s := range c.Sinks {
		if err := ownSecurity(s.Security, c.Security).Validate(); err != nil {
			errs = append(errs, fmt.Errorf("sinks[%d] %q: %w", i, s.Name, err))
		}
	}
	names := map[string]bool{}
	for i, t := range c.Tail {
		if t.Name == "" {
			errs = append(errs, fmt.Errorf("tail[%d]: name is required (it names the checkpoint directory)", i))
		} else if names["tail/"+t.Name] {
			errs = append(errs, fmt.Errorf("tail[%d]: name %q is used twice", i, t.Name))
		}
		names["tail/"+t.Name] = true
	}
	for i, s := range c.Sinks {
		if s.Name == "" {
			errs = append(errs, fmt.Errorf("sinks[%d]: name is required", i))
		} else if names["sink/"+s.Name] {
			errs = append(errs, fmt.Errorf("sinks[%d]: name %q is used twice", i, s.Name))
		}
		names["sink/"+s.Name] = true
		if s.Out == "" {
			errs = append(errs, fmt.Errorf("sinks[%d] %q: out is required (file:///path or s3://bucket/prefix)", i, s.Name))
		}
	}
	for i, t := range c.Topics {
		if t.Name == "" {
			errs = append(errs, fmt.Errorf("topics[%d]: name is required", i))
		}
	}
	errs = append(errs, c.validateTiered()...)
	if c.SchemaRegistry.On() && len(c.Brokers) == 0 {
		if _, _, err := net.SplitHostPort(c.SchemaRegistry.Listen); err != nil {
			errs = append(errs, fmt.Errorf("schema_registry.listen %q is not host:port: %w", c.SchemaRegistry.Listen, err))
		}
	}
	for _, name := range schemaRegistryOwnedSettings {
		if _, ok := c.Broker.Settings[name]; ok {
			errs = append(errs, fmt.Errorf("broker.settings: %s is set by schema_registry.listen (and schema_registry.enabled); set those instead", name))
		}
	}
	if c.HTTP.MetricsListen != "" && c.HTTP.MetricsListen == c.HTTP.Listen && !strings.HasSuffix(c.HTTP.Listen, ":0") {
		errs = append(errs, errors.New("http.metrics_listen must differ from http.listen: /metrics is kept off the ingest port"))
	}
	if c.HTTP.AuditInterval > 0 && c.HTTP.AuditInterval < 10*time.Second {
		errs = append(errs, fmt.Errorf("http.audit_interval %v is below 10s: each audit reads the whole audit topic and the window's footers (negative turns it off)", c.HTTP.AuditInterval))
	}
	if c.HTTP.AuditSince < 0 || (c.HTTP.AuditSince > 0 && c.HTTP.AuditSince < time.Hour) {
		errs = append(errs, fmt.Errorf("http.audit_since %v is below an hour, the audit's unit", c.HTTP.AuditSince))
	}
	if err := c.Audit.WithDefaults().Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Syslog.validate(); err != nil {
		errs = append(errs, err)
	}
	if c.HTTP.Auth.Token != "" && c.HTTP.Auth.Token != TokenGenerate {
		errs = append(errs, fmt.Errorf("http.auth.token: %q is not %q (a token of your own goes in a file named by http.auth.token_file)", c.HTTP.Auth.Token, TokenGenerate))
	}
	if c.HTTP.Auth.Token == TokenGenerate && c.HTTP.Auth.TokenFile != "" {
		errs = append(errs, errors.New("http.auth: token: generate and token_file both name the token; keep one"))
	}
	if err := c.HTTP.TLS.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("http.%w", err))
	}
	if c.Beacon != nil && c.Beacon.TLS != nil {
		errs = append(errs, errors.New("beacon.tls: under millrace up, the beacon is served on http.listen; set http.tls instead"))
	}
	if c.Beacon != nil && c.Beacon.MetricsListen != "" {
		errs = append(errs, errors.New("beacon.metrics_listen: under millrace up, /metrics is served at http.metrics_listen; set that instead"))
	}
	if err := c.validateOTLP(); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, c.Quotas.validate(len(c.Brokers) > 0)...)
	return errors.Join(errs...)
}

// validateSecure reports what security: on cannot be combined with.
func (c Config) validateSecure() []error {
	var errs []error
	if len(c.Brokers) > 0 {
		errs = append(errs, errors.New("security: on secures the embedded broker; with brokers: (or -b) give the external cluster's tls: and sasl: instead"))
	}
	conflict := !c.Security.IsZero() || !ownSecurity(c.Ship.Security, c.Security).IsZero()
	for _, s := range c.Sinks {
		conflict = conflict || !ownSecurity(s.Security, c.Security).IsZero()
	}
	if conflict {
		errs = append(errs, errors.New("security: on makes every client's tls: and sasl: itself; remove them from the file (and the --tls*/--sasl* flags and MILLRACE_TLS*/MILLRACE_SASL* environment)"))
	}
	var owned []string
	for _, name := range secureOwnedSettings {
		if _, ok := c.Broker.Settings[name]; ok {
			owned = append(owned, name)
		}
	}
	if len(owned) > 0 {
		errs = append(errs, fmt.Errorf("broker.settings: %s are set by security: on; remove them", strings.Join(owned, ", ")))
	}
	return errs
}

// ownSecurity is the part of a section's settings it did not inherit from
// top (see withDefaults), so a problem at the top is reported once.
func ownSecurity(s, top clientauth.Settings) clientauth.Settings {
	if s.TLS == top.TLS {
		s.TLS = nil
	}
	if s.SASL == top.SASL {
		s.SASL = nil
	}
	return s
}

// usedTopics are the topics the appliance's parts write to that Topics does
// not list: the beacon's topics and their dead-letter topics, each tail's
// topic, the syslog receiver's topic, the OTLP receiver's topics and the ops
// metrics topic (sinks create their own dead-letter topics). They get the
// broker's defaults (num.partitions, default.replication.factor), as
// auto-creation would have given them.
func (c Config) usedTopics() []TopicConfig {
	var names []string
	if c.Beacon != nil {
		b := c.Beacon.WithDefaults()
		names = append(names, b.Topic, b.DLQTopic, b.MetricsTopic, b.MetricsDLQTopic)
		if b.RemoteWrite.On() {
			names = append(names, b.RemoteWrite.Topic)
		}
	}
	for _, t := range c.Tail {
		names = append(names, t.Topic)
	}
	names = append(names, c.syslogTopic())
	names = append(names, c.otlpTopics()...)
	if c.OpsMetrics.Interval > 0 {
		names = append(names, c.OpsMetrics.Topic)
	}
	listed := make(map[string]bool, len(c.Topics)+len(names))
	for _, t := range c.Topics {
		listed[t.Name] = true
	}
	var out []TopicConfig
	if c.Audit.On() && !listed[c.Audit.Topic] {
		// One partition keeps every key's records in one order; the
		// records are few.
		listed[c.Audit.Topic] = true
		out = append(out, TopicConfig{Name: c.Audit.Topic, Partitions: 1, ReplicationFactor: -1})
	}
	for _, name := range names {
		if name == "" || listed[name] {
			continue
		}
		listed[name] = true
		out = append(out, TopicConfig{Name: name, Partitions: -1, ReplicationFactor: -1})
	}
	return out
}

// brokerConfig is the embedded broker's configuration: Kafka's defaults
// except auto.create.topics.enable, then broker.settings. Kafka's default
// lets any Metadata request create a topic, so any client that can reach
// the port could fill the disk with topics; the appliance creates the
// topics its own parts use instead (usedTopics), and
// auto.create.topics.enable: "true" in broker.settings turns it back on.
//
// millrace.log.flush.on.ack is on too (Kafka has no such setting): the one
// broker is every topic's only replica, so an acknowledgement from its page
// cache would be lost by a power cut, and a sink could have committed
// offsets past the log end recovered after it. With it a produce is
// answered once fsynced (group commit) and consumers see only fsynced
// records; "millrace.log.flush.on.ack": "false" in broker.settings, or the
// topic config millrace.flush.on.ack, turns it off.
func (c Config) brokerConfig() (broker.Config, error) {
	bc := broker.DefaultConfig()
	bc.Kafka.AutoCreateTopics = false
	bc.Log.FlushOnAck = true
	for name, value := range c.Broker.Settings {
		if err := bc.Set(name, value); err != nil {
			return broker.Config{}, fmt.Errorf("broker.settings: %w", err)
		}
	}
	bc.Kafka.Listener = c.Broker.Listen
	bc.DataDir = filepath.Join(c.Data, "broker")
	if err := c.tieredBrokerConfig(&bc); err != nil {
		return broker.Config{}, err
	}
	if c.SchemaRegistry.On() {
		scheme := "http://"
		if c.Secure {
			scheme = "https://"
		}
		bc.SchemaRegistry.Listeners = scheme + c.SchemaRegistry.Listen
	}
	return bc, nil
}

// schemaRegistryOwnedSettings are the broker settings schema_registry
// sets; giving them in broker.settings as well is refused.
var schemaRegistryOwnedSettings = []string{"schema.registry.listeners"}
