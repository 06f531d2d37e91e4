package cluster

import (
	"fmt"
	"maps"
	"sort"
	"strconv"
	"strings"
	"sync"

	"millrace/broker/log"
	"millrace/internal/settings"
)

// aboveLogSettings are the topic configs that are not about the log's
// storage: replication and policies enforced above the log, kept as
// strings by topic config name (a topic's overrides, Config.TopicDefaults).
// They are validated here; broker/log validates the rest. Only values
// millrace honours are accepted, so a client gets INVALID_CONFIG instead of
// a setting that silently does nothing. cleanup.policy and
// compression.type are log settings: the log's retention and cleaner obey
// the one, its produce path the other.
var aboveLogSettings = settings.NewList[map[string]string](nil,
	// Checked by acks=all produce against the ISR size (docs/architecture.md §5).
	aboveLog("min.insync.replicas", settings.Int, "1", "an acks=all write needs this many in-sync replicas, else NOT_ENOUGH_REPLICAS", func(v string) error {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < 1 {
			return fmt.Errorf("must be an integer of at least 1")
		}
		return nil
	}),
	// Lets a controller elect an out-of-sync leader (docs/architecture.md §5).
	aboveLog("unclean.leader.election.enable", settings.Boolean, "false", "let the controller elect an out-of-sync replica when no in-sync one is alive (may lose acknowledged records)", func(v string) error {
		if _, err := strconv.ParseBool(v); err != nil {
			return fmt.Errorf("must be true or false")
		}
		return nil
	}),
)

// aboveLog is a topic config kept above the log, its broker synonym of
// the same name and changeable at runtime.
func aboveLog(name string, typ settings.Type, def, doc string, check func(string) error) settings.Setting[map[string]string] {
	return settings.Setting[map[string]string]{Name: name, Type: typ, Doc: doc, Synonym: name, Dynamic: true,
		Parse: func(m *map[string]string, v string) error {
			if err := check(v); err != nil {
				return err
			}
			if *m == nil {
				*m = map[string]string{}
			}
			(*m)[name] = v
			return nil
		},
		Format: func(m map[string]string) string {
			if v, ok := m[name]; ok {
				return v
			}
			return def
		},
	}
}

// checkAboveLog validates a value of a topic config kept above the log;
// ok is false for any other name.
func checkAboveLog(name, value string) (ok bool, err error) {
	var scratch map[string]string
	return aboveLogSettings.Set(&scratch, name, value)
}

// TopicSettings describes every topic config, sorted by name: the log's
// and those kept above it.
var TopicSettings = sync.OnceValue(func() []settings.Info {
	all := append(log.Settings.Infos(log.DefaultConfig()), aboveLogSettings.Infos(nil)...)
	sort.Slice(all, func(i, j int) bool { return all[i].Name < all[j].Name })
	return all
})

// TopicConfigInfo describes the topic config of that name.
func TopicConfigInfo(name string) (settings.Info, bool) {
	all := TopicSettings()
	i, ok := sort.Find(len(all), func(i int) int { return strings.Compare(name, all[i].Name) })
	if !ok {
		return settings.Info{}, false
	}
	return all[i], true
}

// TopicConfigNames lists every topic config name a topic may override.
func TopicConfigNames() []string {
	var names []string
	for _, s := range TopicSettings() {
		names = append(names, s.Name)
	}
	return names
}

// DefaultTopicConfigValues returns every topic config's default value: the
// broker-wide value a topic without an override has.
func (c *Cluster) DefaultTopicConfigValues() map[string]string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	values := map[string]string{}
	for _, name := range TopicConfigNames() {
		values[name] = c.brokerLayersLocked(name)[0].Value
	}
	return values
}

// DefaultTopicConfigSources returns every topic config's broker-wide
// default with the layer it comes from, by topic config name.
func (c *Cluster) DefaultTopicConfigSources() map[string]ConfigSynonym {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := map[string]ConfigSynonym{}
	for _, name := range TopicConfigNames() {
		out[name] = c.brokerLayersLocked(name)[0]
	}
	return out
}

// TopicConfigValues returns a topic's effective values of every topic config
// and, separately, its overrides (a subset).
func (c *Cluster) TopicConfigValues(name string) (values, overrides map[string]string, err error) {
	t, ok := c.Topic(name)
	if !ok {
		return nil, nil, fmt.Errorf("%w: %q", ErrUnknownTopic, name)
	}
	cfg, err := c.effectiveConfig(t.Config)
	if err != nil {
		return nil, nil, err
	}
	values = cfg.Values()
	for _, name := range aboveLogSettings.Names() {
		values[name] = c.TopicSetting(t, name)
	}
	return values, maps.Clone(t.Config), nil
}

// topicDefaults returns the built-in and the static (properties file)
// default of every topic config, by topic config name.
func topicDefaults(static log.Config, staticAbove map[string]string) (builtin, configured map[string]string) {
	builtin, configured = log.DefaultConfig().Values(), static.Values()
	maps.Copy(builtin, aboveLogSettings.Values(nil))
	maps.Copy(configured, aboveLogSettings.Values(staticAbove))
	return builtin, configured
}

// effectiveConfig applies the dynamic broker defaults and then overrides to
// the static defaults: log settings through log.Config.Set (where their
// names and values are validated), the others through brokerTopicConfigs.
func (c *Cluster) effectiveConfig(overrides map[string]string) (log.Config, error) {
	cfg := c.defaults
	c.mu.RLock()
	dynamic := c.dynamicTopicDefaultsLocked()
	c.mu.RUnlock()
	for _, name := range sortedNames(dynamic) {
		if _, ok := aboveLogSettings.Lookup(name); ok {
			continue
		}
		if err := cfg.Set(name, dynamic[name]); err != nil {
			return log.Config{}, fmt.Errorf("%w: broker default %s=%q: %v", ErrInvalidConfig, name, dynamic[name], err)
		}
	}
	for _, name := range sortedNames(overrides) {
		value := overrides[name]
		if ok, err := checkAboveLog(name, value); ok {
			if err != nil {
				return log.Config{}, fmt.Errorf("%w: %s=%q: %v", ErrInvalidConfig, name, value, err)
			}
			continue
		}
		if err := cfg.Set(name, value); err != nil {
			return log.Config{}, fmt.Errorf("%w: %s=%q: %v", ErrInvalidConfig, name, value, err)
		}
	}
	if err := cfg.Validate(); err != nil {
		return log.Config{}, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	return cfg, nil
}
