package cluster

// Dynamic broker settings that are not a topic's default: Kafka's
// DynamicConfig.Broker, the replication throttles' rates, which an operator
// (or kafka-reassign-partitions.sh --throttle) sets at runtime with
// AlterConfigs on a broker resource:
//
//	/config/brokers/<id>        {"version":1,"config":{"leader.replication.throttled.rate":"1048576"}}
//	/config/brokers/<default>   the same, for every broker without its own
//
// They are stored, validated and followed with the broker-wide topic
// defaults (brokerconfig.go); what they act on is the wire server's, which
// reads the effective value with BrokerSetting and learns of a change
// through OnBrokerSettings. A broker's own value wins over the cluster-wide
// one, which wins over the properties file.

import (
	"fmt"
	"strconv"
)

// brokerSettings are the dynamic broker settings, each with its check.
var brokerSettings = map[string]func(value string) error{
	"leader.replication.throttled.rate":   checkRate,
	"follower.replication.throttled.rate": checkRate,
}

// checkRate accepts a byte rate: a whole number of bytes per second, 0 or
// more (Kafka's LONG with atLeast(0)).
func checkRate(value string) error {
	n, err := strconv.ParseInt(value, 10, 64)
	if err != nil || n < 0 {
		return fmt.Errorf("want a whole number of bytes per second, 0 or more")
	}
	return nil
}

// IsBrokerSetting reports whether a broker config is a dynamic broker
// setting (changeable at runtime, not a topic default).
func IsBrokerSetting(name string) bool {
	_, ok := brokerSettings[name]
	return ok
}

// BrokerSetting returns a dynamic broker setting's value for this broker:
// its own dynamic value, else the cluster-wide one; ok is false when
// neither is set (the properties file's value applies).
func (c *Cluster) BrokerSetting(name string) (value string, ok bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, layer := range []map[string]string{c.dynamicBroker, c.dynamicDefault} {
		if v, ok := layer[name]; ok {
			return v, true
		}
	}
	return "", false
}

// BrokerSettingLayers returns the dynamic layers that set a broker setting
// on a broker resource ("" for the cluster-wide one, or this broker's ID),
// the effective one first: for this broker its own and the cluster-wide
// value, for "" the cluster-wide one only.
func (c *Cluster) BrokerSettingLayers(resource, name string) ([]ConfigSynonym, error) {
	entity, err := brokerEntity(resource)
	if err != nil {
		return nil, err
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	var layers []ConfigSynonym
	if v, ok := c.dynamicBroker[name]; ok && entity != defaultBrokerEntity {
		layers = append(layers, ConfigSynonym{name, v, SourceDynamicBroker})
	}
	if v, ok := c.dynamicDefault[name]; ok {
		layers = append(layers, ConfigSynonym{name, v, SourceDynamicDefaultBroker})
	}
	return layers, nil
}

// OnBrokerSettings has fn called after every change of the dynamic broker
// configs this broker uses, whichever broker wrote it. fn runs on the
// goroutine that applied the change and must not block; it may call
// BrokerSetting.
func (c *Cluster) OnBrokerSettings(fn func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.onBrokerSettings = fn
}
