package cluster

// Broker-wide topic defaults and their runtime changes (Kafka's KIP-226
// dynamic broker configs), kept where Kafka keeps them:
//
//	/config/brokers/<default>             {"version":1,"config":{"min.insync.replicas":"2"}}
//	/config/brokers/<id>                  the same, for one broker
//	/config/changes/config_change_<seq>   {"version":2,"entity_path":"brokers/<default>"}
//
// Keys are the broker names (log.retention.ms, log.cleanup.policy,
// min.insync.replicas, ...). A topic's value of a setting comes from the
// first of these that has it, as in Kafka: the topic's override
// (DYNAMIC_TOPIC_CONFIG), this broker's dynamic config (DYNAMIC_BROKER_CONFIG),
// the cluster-wide dynamic default (DYNAMIC_DEFAULT_BROKER_CONFIG), the
// properties file (STATIC_BROKER_CONFIG), the built-in default
// (DEFAULT_CONFIG). Every broker watches both of its nodes (sync.go), so a
// change applies everywhere without a restart; the change notification is
// written for Kafka's own brokers and tools, which follow /config/changes.

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sort"
	"strconv"
	"strings"
	"sync"

	"millrace/broker/coord"
	"millrace/broker/log"
)

// Store paths of dynamic broker configs.
const (
	brokerConfigsPath   = "/config/brokers"
	configChangesPath   = "/config/changes"
	configChangePrefix  = "config_change_"
	defaultBrokerEntity = "<default>"
	// keepConfigChanges bounds the change notifications left in the store;
	// readers only need the latest.
	keepConfigChanges = 100
)

func brokerConfigPath(entity string) string { return brokerConfigsPath + "/" + entity }

// ErrInvalidBrokerConfig: a broker config that cannot be changed at runtime
// (Kafka's read-only settings, and names millrace does not know) or a bad
// value for one that can. Kafka answers both with INVALID_REQUEST.
var ErrInvalidBrokerConfig = errors.New("invalid broker config")

// ConfigSource is where a config value comes from, numbered as Kafka's
// DescribeConfigs sources.
type ConfigSource int8

// Kafka's config sources, most specific first.
const (
	SourceTopic                ConfigSource = 1 // DYNAMIC_TOPIC_CONFIG
	SourceDynamicBroker        ConfigSource = 2 // DYNAMIC_BROKER_CONFIG
	SourceDynamicDefaultBroker ConfigSource = 3 // DYNAMIC_DEFAULT_BROKER_CONFIG
	SourceStaticBroker         ConfigSource = 4 // STATIC_BROKER_CONFIG
	SourceDefault              ConfigSource = 5 // DEFAULT_CONFIG
)

// ConfigSynonym is one layer that sets a config: its name there (a broker
// name for the broker layers), value and source.
type ConfigSynonym struct {
	Name   string
	Value  string
	Source ConfigSource
}

// ConfigValue is a config's effective value with every layer that sets it,
// the effective one first (Kafka's synonyms).
type ConfigValue struct {
	Name     string
	Value    string
	Source   ConfigSource
	Synonyms []ConfigSynonym
}

// BrokerSynonym returns the broker config that is the broker-wide default of
// a topic config.
func BrokerSynonym(topicConfig string) (string, bool) {
	name, ok := synonyms().byTopic[topicConfig]
	return name, ok
}

// TopicConfigOfBroker returns the topic config whose broker-wide default a
// broker config is. These broker configs are the ones that can change at
// runtime, cluster-wide or per broker; every other broker config is
// read-only.
func TopicConfigOfBroker(brokerConfig string) (string, bool) {
	name, ok := synonyms().byBroker[brokerConfig]
	return name, ok
}

// synonyms maps each topic config to the broker config that is its
// broker-wide default (each setting's Synonym) and back, and lists the
// broker names that are read-only at runtime (not Dynamic: as Kafka's
// DynamicLogConfig leaves out log.message.format.version).
var synonyms = sync.OnceValue(func() (s struct {
	byTopic, byBroker map[string]string
	readOnly          map[string]bool
}) {
	s.byTopic, s.byBroker, s.readOnly = map[string]string{}, map[string]string{}, map[string]bool{}
	for _, t := range TopicSettings() {
		if t.Synonym == "" {
			continue // a topic config with no broker-wide default (topicOnly)
		}
		s.byTopic[t.Name], s.byBroker[t.Synonym] = t.Synonym, t.Name
		s.readOnly[t.Synonym] = !t.Dynamic
	}
	return s
})

// ReadOnlyBrokerConfig reports whether a broker-wide topic default cannot
// change at runtime.
func ReadOnlyBrokerConfig(name string) bool { return synonyms().readOnly[name] }

// DynamicBrokerConfigNames lists the broker names of the broker-wide topic
// defaults, sorted; all but the ReadOnlyBrokerConfig ones can change at
// runtime.
func DynamicBrokerConfigNames() []string { return sortedNames(synonyms().byBroker) }

// KeptAboveLog reports whether a topic config is enforced above the log
// (min.insync.replicas, unclean.leader.election.enable), so its
// broker-wide default lives in Config.TopicDefaults rather than in the
// log.Config given to Open.
func KeptAboveLog(topicConfig string) bool {
	_, ok := aboveLogSettings.Lookup(topicConfig)
	return ok
}

// ValidateTopicDefaults checks broker-wide defaults of the topic configs
// kept above the log (Config.TopicDefaults), by topic config name.
func ValidateTopicDefaults(defaults map[string]string) error {
	for _, name := range sortedNames(defaults) {
		ok, err := checkAboveLog(name, defaults[name])
		if !ok {
			return fmt.Errorf("cluster: %q is not a topic default kept by the cluster layer", name)
		}
		if err != nil {
			broker, _ := BrokerSynonym(name)
			return fmt.Errorf("cluster: %s=%q: %v", broker, defaults[name], err)
		}
	}
	return nil
}

// brokerEntity is the store node name of a broker resource: "<default>"
// for "" (cluster-wide), the broker ID otherwise.
func brokerEntity(resource string) (string, error) {
	if resource == "" {
		return defaultBrokerEntity, nil
	}
	id, err := strconv.ParseInt(resource, 10, 32)
	if err != nil || id < 0 {
		return "", fmt.Errorf("%w: broker resource %q is neither \"\" (cluster-wide) nor a broker ID", ErrInvalidBrokerConfig, resource)
	}
	return strconv.FormatInt(id, 10), nil
}

// readBrokerConfigs reads the cluster-wide and this broker's dynamic
// configs, arming watches when bg is set. A missing node is an empty config.
func (c *Cluster) readBrokerConfigs(bg *background) (clusterWide, own map[string]string, err error) {
	read := func(entity string) (map[string]string, error) {
		data, _, err := c.get(bg, brokerConfigPath(entity))
		if errors.Is(err, coord.ErrNoNode) {
			return map[string]string{}, nil
		}
		if err != nil {
			return nil, fmt.Errorf("cluster: reading broker config %s: %w", entity, err)
		}
		cfg, err := decodeConfig("brokers/"+entity, data)
		if err != nil {
			return nil, fmt.Errorf("cluster: %w", err)
		}
		return c.brokerDefaultsFromStore(entity, cfg), nil
	}
	if clusterWide, err = read(defaultBrokerEntity); err != nil {
		return nil, nil, err
	}
	if own, err = read(strconv.Itoa(int(c.cfg.BrokerID))); err != nil {
		return nil, nil, err
	}
	return clusterWide, own, nil
}

// setBrokerConfigsLocked installs dynamic configs read from the store and
// reports whether they differ from the ones in use; on a change it calls
// the OnBrokerSettings function. Called with adminMu held.
func (c *Cluster) setBrokerConfigsLocked(clusterWide, own map[string]string) bool {
	c.mu.Lock()
	if maps.Equal(c.dynamicDefault, clusterWide) && maps.Equal(c.dynamicBroker, own) {
		c.mu.Unlock()
		return false
	}
	c.dynamicDefault, c.dynamicBroker = clusterWide, own
	notify := c.onBrokerSettings
	c.mu.Unlock()
	if notify != nil {
		notify()
	}
	return true
}

// brokerLayersLocked returns the broker layers of the topic defaults by
// topic config name: the dynamic ones (per broker over cluster-wide) and
// the static ones, with each value's source; for a topic config with no
// broker-wide default, only its built-in default. Called with mu held.
func (c *Cluster) brokerLayersLocked(topicConfig string) []ConfigSynonym {
	broker, ok := BrokerSynonym(topicConfig)
	if !ok {
		return []ConfigSynonym{{topicConfig, c.builtinTopicDefaults[topicConfig], SourceDefault}}
	}
	var layers []ConfigSynonym
	if v, ok := c.dynamicBroker[broker]; ok {
		layers = append(layers, ConfigSynonym{broker, v, SourceDynamicBroker})
	}
	if v, ok := c.dynamicDefault[broker]; ok {
		layers = append(layers, ConfigSynonym{broker, v, SourceDynamicDefaultBroker})
	}
	builtin := c.builtinTopicDefaults[topicConfig]
	if v := c.staticTopicDefaults[topicConfig]; v != builtin {
		layers = append(layers, ConfigSynonym{broker, v, SourceStaticBroker})
	}
	return append(layers, ConfigSynonym{broker, builtin, SourceDefault})
}

// dynamicTopicDefaultsLocked returns the dynamic broker layers as topic
// config values (per broker over cluster-wide). Called with mu held.
func (c *Cluster) dynamicTopicDefaultsLocked() map[string]string {
	out := map[string]string{}
	for _, layer := range []map[string]string{c.dynamicDefault, c.dynamicBroker} {
		for broker, v := range layer {
			if topic, ok := TopicConfigOfBroker(broker); ok {
				out[topic] = v
			}
		}
	}
	return out
}

// TopicSetting returns a topic's effective value of a topic config kept
// above the log (min.insync.replicas, unclean.leader.election.enable, ...):
// its override, else the broker-wide default.
func (c *Cluster) TopicSetting(t *Topic, name string) string {
	if v, ok := t.Config[name]; ok {
		if known, err := checkAboveLog(name, v); !known || err == nil {
			return v
		}
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.brokerLayersLocked(name)[0].Value
}

// TopicConfigSources returns every config of a topic with its effective
// value, source and synonyms, sorted by name.
func (c *Cluster) TopicConfigSources(name string) ([]ConfigValue, error) {
	values, overrides, err := c.TopicConfigValues(name)
	if err != nil {
		return nil, err
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []ConfigValue
	for _, n := range TopicConfigNames() {
		value, ok := values[n]
		if !ok {
			continue
		}
		var synonyms []ConfigSynonym
		if v, over := overrides[n]; over {
			synonyms = append(synonyms, ConfigSynonym{n, v, SourceTopic})
		}
		synonyms = append(synonyms, c.brokerLayersLocked(n)...)
		out = append(out, ConfigValue{Name: n, Value: value, Source: synonyms[0].Source, Synonyms: synonyms})
	}
	return out, nil
}

// BrokerConfigSources returns the runtime-changeable broker configs of a
// broker resource with their sources: for "" the cluster-wide dynamic
// values only (as Kafka describes the default resource), the broker
// settings (brokersettings.go) included, for this broker's ID every
// broker-wide topic default with the layer it comes from (the broker
// settings' layers are BrokerSettingLayers).
func (c *Cluster) BrokerConfigSources(resource string) ([]ConfigValue, error) {
	entity, err := brokerEntity(resource)
	if err != nil {
		return nil, err
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []ConfigValue
	for _, topic := range TopicConfigNames() {
		broker, ok := BrokerSynonym(topic)
		if !ok {
			continue
		}
		layers := c.brokerLayersLocked(topic)
		if entity == defaultBrokerEntity {
			for _, l := range layers {
				if l.Source == SourceDynamicDefaultBroker {
					out = append(out, ConfigValue{Name: broker, Value: l.Value, Source: l.Source, Synonyms: []ConfigSynonym{l}})
				}
			}
			continue
		}
		out = append(out, ConfigValue{Name: broker, Value: layers[0].Value, Source: layers[0].Source, Synonyms: layers})
	}
	if entity == defaultBrokerEntity {
		// A broker's own layers of the broker settings sit over its
		// properties file, which the wire server describes.
		for _, name := range sortedNames(brokerSettings) {
			if v, ok := c.dynamicDefault[name]; ok {
				l := ConfigSynonym{name, v, SourceDynamicDefaultBroker}
				out = append(out, ConfigValue{Name: name, Value: v, Source: l.Source, Synonyms: []ConfigSynonym{l}})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// DynamicBrokerConfig returns the dynamic configs stored for a broker
// resource ("" cluster-wide, or this broker's ID), by broker config name.
func (c *Cluster) DynamicBrokerConfig(resource string) (map[string]string, error) {
	entity, err := brokerEntity(resource)
	if err != nil {
		return nil, err
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	stored := c.dynamicDefault
	if entity != defaultBrokerEntity {
		if entity != strconv.Itoa(int(c.cfg.BrokerID)) {
			return nil, fmt.Errorf("%w: broker %s is not this broker (%d)", ErrInvalidBrokerConfig, entity, c.cfg.BrokerID)
		}
		stored = c.dynamicBroker
	}
	out := make(map[string]string, len(stored))
	maps.Copy(out, stored)
	return out, nil
}

// validateBrokerConfig checks configs for a broker resource: only the
// broker-wide topic defaults change at runtime, and each value must be one
// a topic could hold. The log settings are checked together, applied over
// base and under the more specific layer above (nil for none), so a
// combination no topic could have (message.max.bytes above
// millrace.log.max.decompressed.bytes) is refused too.
func validateBrokerConfig(configs map[string]string, base log.Config, above map[string]string) error {
	cfg := base
	for _, name := range sortedNames(configs) {
		value := configs[name]
		if check, ok := brokerSettings[name]; ok {
			if err := check(value); err != nil {
				return fmt.Errorf("%w: %s=%q: %v", ErrInvalidBrokerConfig, name, value, err)
			}
			continue
		}
		topic, ok := TopicConfigOfBroker(name)
		if !ok || ReadOnlyBrokerConfig(name) {
			var changeable []string
			for _, n := range DynamicBrokerConfigNames() {
				if !ReadOnlyBrokerConfig(n) {
					changeable = append(changeable, n)
				}
			}
			changeable = append(changeable, sortedNames(brokerSettings)...)
			return fmt.Errorf("%w: %s cannot be changed at runtime (it is read-only, or not a broker config millrace knows); the changeable ones are %s",
				ErrInvalidBrokerConfig, name, strings.Join(changeable, ", "))
		}
		if ok, err := checkAboveLog(topic, value); ok {
			if err != nil {
				return fmt.Errorf("%w: %s=%q: %v", ErrInvalidBrokerConfig, name, value, err)
			}
			continue
		}
		if err := cfg.Set(topic, value); err != nil {
			return fmt.Errorf("%w: %s=%q: %v", ErrInvalidBrokerConfig, name, value, err)
		}
	}
	if err := applyBrokerLayer(&cfg, above); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidBrokerConfig, err)
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidBrokerConfig, err)
	}
	return nil
}

// applyBrokerLayer sets a dynamic layer's log settings on cfg.
func applyBrokerLayer(cfg *log.Config, layer map[string]string) error {
	for _, name := range sortedNames(layer) {
		if topic, ok := TopicConfigOfBroker(name); ok && !KeptAboveLog(topic) {
			if err := cfg.Set(topic, layer[name]); err != nil {
				return fmt.Errorf("%s=%q: %v", name, layer[name], err)
			}
		}
	}
	return nil
}

// SetBrokerConfig replaces the dynamic configs of a broker resource ("" for
// the cluster-wide defaults, or this broker's ID) with configs, by broker
// config name; an empty map removes them all. The node and a change
// notification are written in one multi-op, then the new defaults are
// applied to every open log here; other brokers apply them when their
// watch fires. With validateOnly it only validates. Errors wrap
// ErrInvalidBrokerConfig for bad requests.
func (c *Cluster) SetBrokerConfig(resource string, configs map[string]string, validateOnly bool) error {
	entity, err := brokerEntity(resource)
	if err != nil {
		return err
	}
	if entity != defaultBrokerEntity && entity != strconv.Itoa(int(c.cfg.BrokerID)) {
		return fmt.Errorf("%w: broker %s is not this broker (%d)", ErrInvalidBrokerConfig, entity, c.cfg.BrokerID)
	}
	c.adminMu.Lock()
	defer c.adminMu.Unlock()
	if err := c.checkOpen(); err != nil {
		return err
	}
	// Checked with the layers it joins: the cluster-wide one sits under this
	// broker's own values, a broker's own over the cluster-wide ones.
	c.mu.RLock()
	base, above := c.defaults, c.dynamicBroker
	if entity != defaultBrokerEntity {
		above = nil
		err = applyBrokerLayer(&base, c.dynamicDefault)
	}
	c.mu.RUnlock()
	if err != nil {
		return fmt.Errorf("cluster: the stored cluster-wide broker config: %w", err)
	}
	if err := validateBrokerConfig(configs, base, above); err != nil || validateOnly {
		return err
	}
	configs = maps.Clone(configs)
	if configs == nil {
		configs = map[string]string{}
	}
	if err := c.writeBrokerConfig(entity, configs); err != nil {
		return err
	}
	c.mu.RLock()
	clusterWide, own := c.dynamicDefault, c.dynamicBroker
	c.mu.RUnlock()
	if entity == defaultBrokerEntity {
		clusterWide = configs
	} else {
		own = configs
	}
	if c.setBrokerConfigsLocked(clusterWide, own) {
		c.applyConfigsLocked()
	}
	c.logger.Info("dynamic broker config changed", "entity", entity, "configs", len(configs))
	c.poke()
	return nil
}

// writeBrokerConfig stores a broker entity's configs and a change
// notification, then trims old notifications.
func (c *Cluster) writeBrokerConfig(entity string, configs map[string]string) error {
	for _, p := range []string{brokerConfigsPath, configChangesPath} {
		if err := coord.EnsurePath(c.store, p); err != nil {
			return fmt.Errorf("cluster: creating %s: %w", p, err)
		}
	}
	notice, err := json.Marshal(struct {
		Version    int    `json:"version"`
		EntityPath string `json:"entity_path"`
	}{2, "brokers/" + entity})
	if err != nil {
		return err
	}
	path := brokerConfigPath(entity)
	notify := coord.CreateOp{Path: configChangesPath + "/" + configChangePrefix, Data: notice, Mode: coord.PersistentSequential}
	for attempt := 0; ; attempt++ {
		write := coord.Op(coord.SetOp{Path: path, Data: encodeConfig(configs), Version: coord.AnyVersion})
		if ok, _, err := c.store.Exists(path); err != nil {
			return fmt.Errorf("cluster: writing broker config %s: %w", entity, err)
		} else if !ok {
			write = coord.CreateOp{Path: path, Data: encodeConfig(configs), Mode: coord.Persistent}
		}
		err := c.store.Multi(write, notify)
		if (errors.Is(err, coord.ErrNodeExists) || errors.Is(err, coord.ErrNoNode)) && attempt < 3 {
			continue // created or deleted by another broker in between
		}
		if err != nil {
			return fmt.Errorf("cluster: writing broker config %s: %w", entity, err)
		}
		break
	}
	names, err := c.store.Children(configChangesPath)
	if err != nil {
		return fmt.Errorf("cluster: listing %s: %w", configChangesPath, err)
	}
	var ours []string
	for _, n := range names {
		if strings.HasPrefix(n, configChangePrefix) {
			ours = append(ours, n)
		}
	}
	// Sequence suffixes are zero-padded, so name order is creation order.
	sort.Strings(ours)
	for ; len(ours) > keepConfigChanges; ours = ours[1:] {
		if err := c.store.Delete(configChangesPath+"/"+ours[0], coord.AnyVersion); err != nil && !errors.Is(err, coord.ErrNoNode) {
			return fmt.Errorf("cluster: trimming %s: %w", configChangesPath, err)
		}
	}
	return nil
}

// applyConfigsLocked gives every open log its topic's effective config
// again, after the broker-wide defaults changed. Called with adminMu held.
func (c *Cluster) applyConfigsLocked() {
	c.mu.Lock()
	entries := maps.Clone(c.topics)
	c.signalModelLocked()
	c.mu.Unlock()
	for name, e := range entries {
		cfg, err := c.effectiveConfig(e.topic.Config)
		if err != nil {
			c.logger.Error("topic config invalid under the new broker defaults; keeping the old", "topic", name, "err", err)
			continue
		}
		for p, l := range e.logs {
			if l == nil {
				continue
			}
			if err := l.SetConfig(cfg); err != nil {
				c.logger.Error("applying a topic config to a partition log", "topic", name, "partition", p, "err", err)
			}
		}
	}
}

// brokerDefaultsFromStore drops stored dynamic configs that this build
// cannot apply (written by a newer version or by hand), with a log line,
// so one bad value does not make every topic's config invalid.
func (c *Cluster) brokerDefaultsFromStore(entity string, configs map[string]string) map[string]string {
	out := make(map[string]string, len(configs))
	for _, name := range sortedNames(configs) {
		one := map[string]string{name: configs[name]}
		if err := validateBrokerConfig(one, c.defaults, nil); err != nil {
			c.logger.Error("ignoring a stored dynamic broker config", "entity", entity, "err", err)
			continue
		}
		out[name] = configs[name]
	}
	return out
}
