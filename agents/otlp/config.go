package otlp

import (
	"errors"
	"fmt"
	"time"

	"millrace/internal/httpserver"
)

// Defaults of Config. The topics and encoding are those of the
// OpenTelemetry Collector's Kafka exporter, so consumers written for it
// read these records unchanged.
const (
	DefaultLogsTopic       = "otlp_logs"
	DefaultMetricsTopic    = "otlp_metrics"
	DefaultTracesTopic     = "otlp_spans"
	DefaultEncoding        = EncodingProto
	DefaultMaxBodyBytes    = 8 << 20
	DefaultMaxDecodedBytes = 64 << 20
	// DefaultMaxRecordBytes stays under the broker's usual
	// message.max.bytes (1 MiB) with room for the batch's own framing.
	DefaultMaxRecordBytes = 1_000_000
	DefaultMaxInFlight    = 4
	DefaultAckTimeout     = 10 * time.Second
	DefaultRetryAfter     = 5 * time.Second
)

// The listen addresses of `millrace up` and `millrace otlp`: OTLP's ports
// on loopback, as the Collector's otlp receiver listens by default, so a
// process on the same host sends to the SDKs' default endpoint and nothing
// else reaches it until the operator opens it.
const (
	DefaultHTTPAddr = "127.0.0.1:4318"
	DefaultGRPCAddr = "127.0.0.1:4317"
	// AddrOff as http_addr or grpc_addr turns that transport off under
	// WithListenDefaults.
	AddrOff = "off"
)

// The record encodings, named as the Collector's Kafka exporter names them.
const (
	EncodingProto = "otlp_proto"
	EncodingJSON  = "otlp_json"
)

// Config configures the receiver. Zero fields take the defaults above
// (WithDefaults).
type Config struct {
	// HTTPAddr is the OTLP/HTTP listen address (the spec's port is 4318).
	// Empty: no HTTP server. The commands read it through
	// WithListenDefaults: empty is DefaultHTTPAddr there, "off" none.
	HTTPAddr string `yaml:"http_addr"`
	// GRPCAddr is the OTLP/gRPC listen address (the spec's port is 4317).
	// Empty: no gRPC server (the commands: DefaultGRPCAddr; "off" none).
	GRPCAddr string `yaml:"grpc_addr"`
	// TLS serves both transports over TLS from PEM files; nil: plain.
	TLS *httpserver.TLSConfig `yaml:"tls"`
	// Auth protects the HTTP routes with a bearer token or basic-auth
	// credentials (internal/httpserver's Auth). Default: none.
	Auth httpserver.AuthConfig `yaml:"auth"`
	// LogsTopic, MetricsTopic and TracesTopic receive each signal.
	// Defaults otlp_logs, otlp_metrics and otlp_spans.
	LogsTopic    string `yaml:"logs_topic"`
	MetricsTopic string `yaml:"metrics_topic"`
	TracesTopic  string `yaml:"traces_topic"`
	// Encoding of the records: otlp_proto (default) or otlp_json, the
	// signal's OTLP data message (LogsData, MetricsData, TracesData).
	Encoding string `yaml:"encoding"`
	// PartitionTracesByID writes one record per trace ID, keyed by the ID
	// in hex, so a trace's spans share a partition. Default: one record per
	// request, no key.
	PartitionTracesByID bool `yaml:"partition_traces_by_id"`
	// PartitionLogsByResourceAttributes and
	// PartitionMetricsByResourceAttributes write one record per resource,
	// keyed by a hash of its attributes.
	PartitionLogsByResourceAttributes    bool `yaml:"partition_logs_by_resource_attributes"`
	PartitionMetricsByResourceAttributes bool `yaml:"partition_metrics_by_resource_attributes"`
	// MaxBodyBytes bounds a request's body as sent (compressed or not); a
	// larger one is answered 413. Default 8 MiB.
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// MaxDecodedBytes bounds a body once gunzipped, and a gRPC message.
	// Default 64 MiB.
	MaxDecodedBytes int64 `yaml:"max_decoded_bytes"`
	// MaxRecordBytes bounds one record's value: keep it under the topic's
	// max.message.bytes. A larger record is split per resource; a resource
	// that alone is larger is refused (partial success). Default 1,000,000.
	MaxRecordBytes int `yaml:"max_record_bytes"`
	// MaxInFlight bounds the requests decoded at once over both transports
	// (each may hold MaxDecodedBytes); one more is answered 503 or
	// UNAVAILABLE. Default 4.
	MaxInFlight int `yaml:"max_in_flight"`
	// AckTimeout is how long a request waits for the broker to acknowledge
	// its records before it is answered 503 or UNAVAILABLE. Default 10s.
	AckTimeout time.Duration `yaml:"ack_timeout"`
	// RetryAfter is the Retry-After (whole seconds, rounded up) and gRPC
	// RetryInfo delay of retryable answers. Default 5s.
	RetryAfter time.Duration `yaml:"retry_after"`
}

// WithDefaults returns c with its zero fields set to the defaults.
func (c Config) WithDefaults() Config {
	setString(&c.LogsTopic, DefaultLogsTopic)
	setString(&c.MetricsTopic, DefaultMetricsTopic)
	setString(&c.TracesTopic, DefaultTracesTopic)
	setString(&c.Encoding, DefaultEncoding)
	setDefault(&c.MaxBodyBytes, DefaultMaxBodyBytes)
	setDefault(&c.MaxDecodedBytes, DefaultMaxDecodedBytes)
	setDefault(&c.MaxRecordBytes, DefaultMaxRecordBytes)
	setDefault(&c.MaxInFlight, DefaultMaxInFlight)
	setDefault(&c.AckTimeout, DefaultAckTimeout)
	setDefault(&c.RetryAfter, DefaultRetryAfter)
	return c
}

// WithListenDefaults returns c with an empty HTTPAddr or GRPCAddr set to
// its default and one set to AddrOff emptied: the addresses as the
// commands read them, where a section that names neither listens on both
// OTLP ports.
func (c Config) WithListenDefaults() Config {
	for _, a := range []struct {
		v   *string
		def string
	}{{&c.HTTPAddr, DefaultHTTPAddr}, {&c.GRPCAddr, DefaultGRPCAddr}} {
		switch *a.v {
		case "":
			*a.v = a.def
		case AddrOff:
			*a.v = ""
		}
	}
	return c
}

func setString(v *string, def string) {
	if *v == "" {
		*v = def
	}
}

func setDefault[T int | int64 | time.Duration](v *T, def T) {
	if *v == 0 {
		*v = def
	}
}

// Validate checks c (after WithDefaults) and says what is wrong.
func (c Config) Validate() error {
	var errs []error
	if c.HTTPAddr == "" && c.GRPCAddr == "" {
		errs = append(errs, errors.New("otlp: neither http_addr nor grpc_addr is set; set at least one (OTLP's ports are 4318 and 4317)"))
	}
	if c.Encoding != EncodingProto && c.Encoding != EncodingJSON {
		errs = append(errs, fmt.Errorf("otlp: encoding %q is not one of %s or %s", c.Encoding, EncodingProto, EncodingJSON))
	}
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"max_body_bytes", c.MaxBodyBytes}, {"max_decoded_bytes", c.MaxDecodedBytes},
		{"max_record_bytes", int64(c.MaxRecordBytes)}, {"max_in_flight", int64(c.MaxInFlight)},
		{"ack_timeout", int64(c.AckTimeout)}, {"retry_after", int64(c.RetryAfter)},
	} {
		if f.v < 0 {
			errs = append(errs, fmt.Errorf("otlp: %s is %d; it must be positive (or 0 for the default)", f.name, f.v))
		}
	}
	if c.MaxDecodedBytes > 0 && c.MaxBodyBytes > c.MaxDecodedBytes {
		errs = append(errs, fmt.Errorf("otlp: max_body_bytes (%d) is more than max_decoded_bytes (%d); the bodies between the two could never be decoded; lower max_body_bytes or raise max_decoded_bytes",
			c.MaxBodyBytes, c.MaxDecodedBytes))
	}
	if c.MaxDecodedBytes > 1<<31-1 {
		errs = append(errs, fmt.Errorf("otlp: max_decoded_bytes (%d) is more than gRPC's 2 GiB message limit", c.MaxDecodedBytes))
	}
	if err := c.TLS.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("otlp: %w", err))
	}
	return errors.Join(errs...)
}
