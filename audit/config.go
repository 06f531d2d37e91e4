package audit

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Config is the audit section of an agent's configuration:
//
//	audit:
//	  enabled: true
//	  topic: _millrace.audit
//	  interval: 10s
type Config struct {
	// Enabled turns counting and publishing on. Default true.
	Enabled *bool `yaml:"enabled"`
	// Topic receives the audit records. Default _millrace.audit.
	Topic string `yaml:"topic"`
	// Interval is how often counts that changed are published; the last
	// ones are also published at shutdown. Default 10s.
	Interval time.Duration `yaml:"interval"`
	// Retention is how long an hour's counts are kept after the hour ends;
	// they are dropped once their last value is published. Events of an
	// hour older than this are not counted (see Counter.Add). Default 48h.
	Retention time.Duration `yaml:"retention"`
	// MaxKeys bounds the (topic, source, hour) counts held at once (click
	// sources come from client-sent urls); events of a new source beyond it
	// are counted exactly in the hour's "(other)" count, which the audit
	// judges with the hour's other sources. Default 20000.
	MaxKeys int `yaml:"max_keys"`
	// Instance names the publisher in its records' keys; it must stay the
	// same across restarts, so that a restarted agent's totals replace its
	// earlier ones. Default: a tailer's random id kept in its data_dir
	// (audit-instance-id); a beacon's host name and listen address.
	Instance string `yaml:"instance"`
}

// Defaults of Config.
const (
	DefaultInterval  = 10 * time.Second
	DefaultRetention = 48 * time.Hour
	DefaultMaxKeys   = 20_000
)

// WithDefaults fills unset fields.
func (c Config) WithDefaults() Config {
	if c.Enabled == nil {
		on := true
		c.Enabled = &on
	}
	if c.Topic == "" {
		c.Topic = Topic
	}
	if c.Interval == 0 {
		c.Interval = DefaultInterval
	}
	if c.Retention == 0 {
		c.Retention = DefaultRetention
	}
	if c.MaxKeys == 0 {
		c.MaxKeys = DefaultMaxKeys
	}
	return c
}

// On reports whether the audit is enabled (true when unset).
func (c Config) On() bool { return c.Enabled == nil || *c.Enabled }

// Validate rejects impossible settings; call it on WithDefaults' result.
func (c Config) Validate() error {
	if c.Interval < 100*time.Millisecond {
		return fmt.Errorf("audit.interval %s is below 100ms: every interval produces a record per changed source and hour", c.Interval)
	}
	if c.Retention < 2*time.Hour {
		return fmt.Errorf("audit.retention %s is below 2h: an hour's counts must outlive the hour and the next", c.Retention)
	}
	if c.MaxKeys < 1 {
		return errors.New("audit.max_keys must be at least 1")
	}
	if c.Topic == "" {
		return errors.New("audit.topic must not be empty")
	}
	if strings.Contains(c.Instance, "/") {
		return fmt.Errorf("audit.instance %q must not contain '/', which separates the parts of a record key", c.Instance)
	}
	return nil
}
