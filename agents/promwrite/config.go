package promwrite

import (
	"errors"
	"fmt"
	"time"
)

// Defaults of Config.
const (
	// DefaultTopic is the beacon's metrics topic (beacon.DefaultMetricsTopic),
	// so remote-written samples land where pushed expositions do.
	DefaultTopic           = "ops.metrics"
	DefaultMaxBodyBytes    = 8 << 20
	DefaultMaxDecodedBytes = 64 << 20
	// DefaultMaxSamples is ten times Prometheus's default
	// queue_config.max_samples_per_send (2000), and its records fit
	// agents/ship's default 16 MiB buffer.
	DefaultMaxSamples = 20_000
	DefaultMaxSeries  = 20_000
	// DefaultMaxLabels allows 20 labels a series at DefaultMaxSeries.
	DefaultMaxLabels   = 400_000
	DefaultMaxMetadata = 10_000
	// DefaultMaxFamilies bounds the metadata remembered across requests.
	DefaultMaxFamilies = 100_000
	DefaultMaxInFlight = 4
	DefaultAckTimeout  = 10 * time.Second
	DefaultRetryAfter  = 5 * time.Second
)

// Config configures the remote write handler. Zero fields take the defaults
// above (WithDefaults).
type Config struct {
	// Topic receives the samples, one metric-sample event per record keyed
	// by the metric's name. Default DefaultTopic.
	Topic string `yaml:"topic"`
	// Source is every event's source when the request names none (the
	// "source" query parameter or the X-Millrace-Source header, which
	// remote_write's url and headers settings can set). Empty: the client's
	// IP address.
	Source string `yaml:"source"`
	// MaxBodyBytes bounds a request's compressed body; a larger one is
	// answered 413. Default 8 MiB.
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// MaxDecodedBytes bounds the body once snappy-decoded; the size the
	// snappy header declares is checked before anything is allocated for
	// it. Default 64 MiB.
	MaxDecodedBytes int64 `yaml:"max_decoded_bytes"`
	// MaxSeries, MaxSamples, MaxLabels and MaxMetadata bound one request's
	// series, float samples, labels (over all series) and metadata entries;
	// a request over one is answered 413. Defaults 20,000, 20,000, 400,000
	// and 10,000.
	MaxSeries   int `yaml:"max_series"`
	MaxSamples  int `yaml:"max_samples"`
	MaxLabels   int `yaml:"max_labels"`
	MaxMetadata int `yaml:"max_metadata"`
	// MaxFamilies bounds the metric families whose kind (from metadata) is
	// remembered across requests. Default 100,000.
	MaxFamilies int `yaml:"max_families"`
	// MaxInFlight bounds the requests decoded at once (each may hold
	// MaxDecodedBytes); one more is answered 503 with Retry-After. Default 4.
	MaxInFlight int `yaml:"max_in_flight"`
	// AckTimeout is how long a request waits for the broker to acknowledge
	// its samples before it is answered 503. Default 10s.
	AckTimeout time.Duration `yaml:"ack_timeout"`
	// RetryAfter is the Retry-After of 503 answers, in whole seconds
	// rounded up. Default 5s.
	RetryAfter time.Duration `yaml:"retry_after"`
}

// WithDefaults returns c with its zero fields set to the defaults.
func (c Config) WithDefaults() Config {
	if c.Topic == "" {
		c.Topic = DefaultTopic
	}
	setDefault(&c.MaxBodyBytes, DefaultMaxBodyBytes)
	setDefault(&c.MaxDecodedBytes, DefaultMaxDecodedBytes)
	setDefault(&c.MaxSeries, DefaultMaxSeries)
	setDefault(&c.MaxSamples, DefaultMaxSamples)
	setDefault(&c.MaxLabels, DefaultMaxLabels)
	setDefault(&c.MaxMetadata, DefaultMaxMetadata)
	setDefault(&c.MaxFamilies, DefaultMaxFamilies)
	setDefault(&c.MaxInFlight, DefaultMaxInFlight)
	setDefault(&c.AckTimeout, DefaultAckTimeout)
	setDefault(&c.RetryAfter, DefaultRetryAfter)
	return c
}

func setDefault[T int | int64 | time.Duration](v *T, def T) {
	if *v == 0 {
		*v = def
	}
}

// Validate checks c (after WithDefaults) and says what is wrong.
func (c Config) Validate() error {
	var errs []error
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"max_body_bytes", c.MaxBodyBytes}, {"max_decoded_bytes", c.MaxDecodedBytes},
		{"max_series", int64(c.MaxSeries)}, {"max_samples", int64(c.MaxSamples)},
		{"max_labels", int64(c.MaxLabels)}, {"max_metadata", int64(c.MaxMetadata)},
		{"max_families", int64(c.MaxFamilies)}, {"max_in_flight", int64(c.MaxInFlight)},
		{"ack_timeout", int64(c.AckTimeout)}, {"retry_after", int64(c.RetryAfter)},
	} {
		if f.v < 0 {
			errs = append(errs, fmt.Errorf("promwrite: %s is %d; it must be positive (or 0 for the default)", f.name, f.v))
		}
	}
	if c.MaxDecodedBytes > 0 && c.MaxBodyBytes > c.MaxDecodedBytes {
		errs = append(errs, fmt.Errorf("promwrite: max_body_bytes (%d) is more than max_decoded_bytes (%d); the bodies between the two could never be decoded; lower max_body_bytes or raise max_decoded_bytes",
			c.MaxBodyBytes, c.MaxDecodedBytes))
	}
	if c.MaxSeries > c.MaxLabels && c.MaxLabels > 0 {
		errs = append(errs, fmt.Errorf("promwrite: max_labels (%d) is less than max_series (%d); every series has at least its __name__ label",
			c.MaxLabels, c.MaxSeries))
	}
	return errors.Join(errs...)
}
