package kafka

// DescribeConfigs (key 32), versions 0–4.
//
// Topic resources: every topic config with its effective value and the
// source it comes from, as Kafka: DYNAMIC_TOPIC_CONFIG (a per-topic
// override), DYNAMIC_BROKER_CONFIG or DYNAMIC_DEFAULT_BROKER_CONFIG (a
// broker-wide default changed at runtime, for this broker or cluster-wide),
// STATIC_BROKER_CONFIG (the properties file) or DEFAULT_CONFIG (v0:
// is_default); synonyms when asked (v1+: every layer that sets it, the
// effective one first, broker layers under their broker names), and the
// config type (v3+). An unknown topic gets UNKNOWN_TOPIC_OR_PARTITION.
//
// Broker resources: "" (the cluster-wide default resource) lists the
// cluster-wide dynamic configs only, as Kafka does; this broker's ID lists
// the wire server's configs (read-only, STATIC_BROKER_CONFIG when set away
// from the default, but for leader.replication.throttled.rate and
// follower.replication.throttled.rate, changeable) and the broker-wide
// topic defaults (log.retention.ms, min.insync.replicas, ...; changeable)
// with their sources. Another broker's
// ID gets INVALID_REQUEST (the client should ask that broker).
//
// config_names filters (unknown names are left out, as Kafka does).
// Documentation strings (v3+ include_documentation) are given for the
// deprecated settings only (message.format.version, marked "[DEPRECATED]"
// as Kafka marks it); the others get null documentation.
// Unsupported: broker-logger resources (INVALID_REQUEST).

import (
	"context"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/acl"
	"millrace/broker/cluster"
)

func init() { regKey(32, 0, 4, handleDescribeConfigs) }

func handleDescribeConfigs(_ context.Context, b *Broker, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.DescribeConfigsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, rr := range req.Resources {
		sr := kmsg.NewDescribeConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		if code := b.configResourceDenied(r, rr.ResourceType, rr.ResourceName, acl.DescribeConfigs); code != 0 {
			sr.ErrorCode = code
			resp.Resources = append(resp.Resources, sr)
			continue
		}
		var want map[string]bool
		if rr.ConfigNames != nil {
			want = make(map[string]bool, len(rr.ConfigNames))
			for _, n := range rr.ConfigNames {
				want[n] = true
			}
		}
		add := func(name, value string, source int8, readOnly bool, layers []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym) {
			if want != nil && !want[name] {
				return
			}
			c := kmsg.NewDescribeConfigsResponseResourceConfig()
			c.Name, c.Value, c.ReadOnly = name, strp(value), readOnly
			c.Source = kmsg.ConfigSource(source)
			c.IsDefault = source == int8(cluster.SourceDefault)
			c.ConfigType = kmsg.ConfigType(configType(name))
			if req.IncludeDocumentation {
				c.Documentation = configDoc(name)
			}
			if req.IncludeSynonyms {
				c.ConfigSynonyms = layers
			}
			sr.Configs = append(sr.Configs, c)
		}

		switch rr.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			entries, err := b.cluster.TopicConfigSources(rr.ResourceName)
			if err != nil {
				sr.ErrorCode, sr.ErrorMessage = clusterErrorCode(err)
				break
			}
			for _, e := range entries {
				add(e.Name, e.Value, int8(e.Source), false, synonyms(e.Synonyms))
			}

		case kmsg.ConfigResourceTypeBroker:
			if code, msg := b.checkBrokerResource(rr.ResourceName); code != 0 {
				sr.ErrorCode, sr.ErrorMessage = code, msg
				break
			}
			dynamic, err := b.cluster.BrokerConfigSources(rr.ResourceName)
			if err != nil {
				sr.ErrorCode, sr.ErrorMessage = clusterErrorCode(err)
				break
			}
			for _, e := range dynamic {
				add(e.Name, e.Value, int8(e.Source), cluster.ReadOnlyBrokerConfig(e.Name), synonyms(e.Synonyms))
			}
			if rr.ResourceName == "" {
				break // the default resource holds the dynamic defaults only
			}
			values, defaults := b.cfg.Values(), DefaultConfig().Values()
			for _, name := range ConfigNames() {
				source := int8(cluster.SourceDefault)
				if values[name] != defaults[name] {
					source = int8(cluster.SourceStaticBroker)
				}
				static := synonym(name, values[name], source)
				if !cluster.IsBrokerSetting(name) {
					add(name, values[name], source, true, []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{static})
					continue
				}
				// A dynamic broker setting: its dynamic layers over the
				// properties file.
				layers, err := b.cluster.BrokerSettingLayers(rr.ResourceName, name)
				if err != nil {
					sr.ErrorCode, sr.ErrorMessage = clusterErrorCode(err)
					break
				}
				all := append(synonyms(layers), static)
				add(name, *all[0].Value, int8(all[0].Source), false, all)
			}

		default:
			sr.ErrorCode = kerr.InvalidRequest.Code
			sr.ErrorMessage = strp("only topic and broker config resources are supported")
		}
		resp.Resources = append(resp.Resources, sr)
	}
	return resp, nil
}

func synonyms(layers []cluster.ConfigSynonym) []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym {
	out := make([]kmsg.DescribeConfigsResponseResourceConfigConfigSynonym, 0, len(layers))
	for _, l := range layers {
		out = append(out, synonym(l.Name, l.Value, int8(l.Source)))
	}
	return out
}

func synonym(name, value string, source int8) kmsg.DescribeConfigsResponseResourceConfigConfigSynonym {
	s := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
	s.Name, s.Value, s.Source = name, strp(value), kmsg.ConfigSource(source)
	return s
}

// checkBrokerResource accepts a broker resource name that means this broker:
// "" (the cluster-wide default) or its ID.
func (b *Broker) checkBrokerResource(name string) (int16, *string) {
	if name == "" || name == strconv.Itoa(int(b.cfg.BrokerID)) {
		return 0, nil
	}
	return kerr.InvalidRequest.Code, strp("broker resource " + strconv.Quote(name) + " is not this broker (" + strconv.Itoa(int(b.cfg.BrokerID)) + "); send the request to that broker")
}
