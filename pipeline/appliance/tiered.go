package appliance

// tiered_storage: one setting that puts the topics `millrace up` creates
// on its lake's object store (docs/tiered-storage.md). It turns on the
// embedded broker's tiered storage (remote.log.storage.system.enable),
// points millrace.remote.storage.url at TieredPrefix under a sink's out
// (the same directory or bucket, with the sink's S3 endpoint and region),
// and gives each topic up creates remote.storage.enable=true and
// local.retention.ms, except compacted topics, which Kafka does not tier.
//
// The segments sit apart from the lake's files: every reader of the lake
// lists under a topic's directory (`<topic>/…` in the Hive layout,
// `<namespace>.db/<topic>/data` for Iceberg tables and their orphan
// sweep), never the store's root, so none meets TieredPrefix unless a
// sink lands a topic of that very name, which Validate refuses.

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"millrace/broker"
	"millrace/broker/log"
	"millrace/store"
)

// TieredStorageConfig is tiered_storage:.
type TieredStorageConfig struct {
	// Enabled turns tiered storage on for the embedded broker and the
	// topics up creates. Default false.
	Enabled bool `yaml:"enabled"`
	// LocalRetention is each tiered topic's local.retention.ms: how long a
	// segment stays on the broker's disk once it is in the store. Capped
	// at the topic's retention.ms, which Kafka requires. Default 24h.
	LocalRetention time.Duration `yaml:"local_retention"`
	// Retention, when set, is the retention.ms of the tiered topics whose
	// config sets none: how long their records are kept in all, remote
	// included. Default: the broker's log.retention.ms (7 days).
	Retention time.Duration `yaml:"retention"`
	// Sink names the sink whose out holds the segments, under
	// TieredPrefix. Default: the first sink.
	Sink string `yaml:"sink"`
}

// TieredPrefix is the directory (or key prefix) under a sink's out that
// holds the tiered segments. A Kafka topic may be named so, hence the
// check in Validate.
const TieredPrefix = "_tiered"

// DefaultLocalRetention is tiered_storage.local_retention's default.
const DefaultLocalRetention = 24 * time.Hour

// tieredOwnedSettings are the broker settings tiered_storage sets; giving
// them in broker.settings as well is refused while it is enabled.
var tieredOwnedSettings = []string{
	"remote.log.storage.system.enable", "millrace.remote.storage.url",
	"millrace.remote.storage.s3.endpoint", "millrace.remote.storage.s3.region",
}

// tieredSink is the sink whose out holds the segments; false when there
// is none.
func (c Config) tieredSink() (SinkConfig, bool) {
	for _, s := range c.Sinks {
		if c.TieredStorage.Sink == "" || s.Name == c.TieredStorage.Sink {
			return s, true
		}
	}
	return SinkConfig{}, false
}

// validateTiered reports what tiered_storage cannot be combined with.
func (c Config) validateTiered() []error {
	ts := c.TieredStorage
	if !ts.Enabled {
		return nil
	}
	var errs []error
	if len(c.Brokers) > 0 {
		errs = append(errs, errors.New("tiered_storage: with brokers: (or -b) there is no embedded broker to tier; turn tiered storage on in the external brokers' settings"))
	}
	sink, ok := c.tieredSink()
	switch {
	case !ok && ts.Sink != "":
		errs = append(errs, fmt.Errorf("tiered_storage.sink: no sink is named %q", ts.Sink))
	case !ok:
		errs = append(errs, errors.New("tiered_storage: the segments go to a sink's lake, and no sink is configured (add one under sinks:)"))
	case slices.Contains(sink.Topics, TieredPrefix):
		errs = append(errs, fmt.Errorf("tiered_storage: sink %q lands a topic named %q, the directory of the tiered segments in its out; rename the topic or tier to another sink's out", sink.Name, TieredPrefix))
	}
	if ts.LocalRetention < 0 || ts.Retention < 0 {
		errs = append(errs, fmt.Errorf("tiered_storage: local_retention %v and retention %v must not be negative", ts.LocalRetention, ts.Retention))
	}
	if ts.Retention > 0 && ts.LocalRetention > ts.Retention {
		errs = append(errs, fmt.Errorf("tiered_storage: local_retention %v exceeds retention %v: the local part cannot outlive the whole", ts.LocalRetention, ts.Retention))
	}
	var owned []string
	for _, name := range tieredOwnedSettings {
		if _, ok := c.Broker.Settings[name]; ok {
			owned = append(owned, name)
		}
	}
	if len(owned) > 0 {
		errs = append(errs, fmt.Errorf("broker.settings: %v are set by tiered_storage; remove them, or turn tiered_storage off and set them yourself", owned))
	}
	return errs
}

// tieredBrokerConfig turns tiered storage on in bc, with the remote
// storage under the tiered sink's out.
func (c Config) tieredBrokerConfig(bc *broker.Config) error {
	sink, ok := c.tieredSink()
	if !c.TieredStorage.Enabled || !ok {
		return nil
	}
	lake, err := store.CanonicalURL(sink.Out)
	if err != nil {
		return fmt.Errorf("tiered_storage: the out of sink %q: %w", sink.Name, err)
	}
	bc.Tier.Enable = true
	bc.Tier.URL = lake + "/" + TieredPrefix
	bc.Tier.S3Endpoint, bc.Tier.S3Region = sink.S3Endpoint, sink.S3Region
	return nil
}

// tieredTopics returns topics with the tiered settings added to each that
// is not compacted and does not set remote.storage.enable itself, judged
// with defaults (the embedded broker's log settings) under its config.
func (c Config) tieredTopics(topics []TopicConfig, defaults log.Config) []TopicConfig {
	ts := c.TieredStorage
	if !ts.Enabled {
		return topics
	}
	out := make([]TopicConfig, len(topics))
	for i, t := range topics {
		out[i] = t
		if _, own := t.Config["remote.storage.enable"]; own {
			continue
		}
		eff := defaults
		for name, value := range t.Config {
			if err := eff.Set(name, value); err != nil {
				continue // not a log setting (min.insync.replicas), or a value the broker refuses at creation
			}
		}
		if eff.Compacts() {
			continue
		}
		cfg := make(map[string]string, len(t.Config)+3)
		for name, value := range t.Config {
			cfg[name] = value
		}
		if _, own := t.Config["retention.ms"]; !own && ts.Retention > 0 {
			cfg["retention.ms"] = strconv.FormatInt(ts.Retention.Milliseconds(), 10)
			eff.Retention = ts.Retention
		}
		cfg["remote.storage.enable"] = "true"
		if _, own := t.Config["local.retention.ms"]; !own {
			local := ts.LocalRetention
			if eff.Retention >= 0 {
				local = min(local, eff.Retention)
			}
			cfg["local.retention.ms"] = strconv.FormatInt(local.Milliseconds(), 10)
		}
		out[i].Config = cfg
	}
	return out
}
