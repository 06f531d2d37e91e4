package kafka

// DescribeConfigs (key 32), versions 0–4.
//
// Topic resources: every topic config with its effective value, source
// DYNAMIC_TOPIC_CONFIG for a per-topic override and DEFAULT_CONFIG otherwise
// (v0: is_default), synonyms when asked (v1+: the override, then the
// default), and the config type (v3+). An unknown topic gets
// UNKNOWN_TOPIC_OR_PARTITION.
//
// Broker resources (name "" or this broker's ID): the wire server's broker
// configs, read-only, STATIC_BROKER_CONFIG when set away from the default.
// Another broker's ID gets INVALID_REQUEST (the client should ask that broker).
//
// config_names filters (unknown names are left out, as Kafka does).
// Unsupported: broker-logger resources (INVALID_REQUEST) and documentation
// strings (v3+ include_documentation gets null documentation).

import (
	"context"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/acl"
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
		add := func(name, value string, source int8, readOnly bool, synonyms []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym) {
			if want != nil && !want[name] {
				return
			}
			c := kmsg.NewDescribeConfigsResponseResourceConfig()
			c.Name, c.Value, c.ReadOnly = name, strp(value), readOnly
			c.Source = kmsg.ConfigSource(source)
			c.IsDefault = source == sourceDefaultConfig
			c.ConfigType = kmsg.ConfigType(configType(name))
			if req.IncludeSynonyms {
				c.ConfigSynonyms = synonyms
			}
			sr.Configs = append(sr.Configs, c)
		}

		switch rr.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			values, overrides, err := b.cluster.TopicConfigValues(rr.ResourceName)
			if err != nil {
				sr.ErrorCode, sr.ErrorMessage = clusterErrorCode(err)
				break
			}
			defaults := b.cluster.DefaultTopicConfigValues()
			for _, e := range topicConfigEntries(values, overrides) {
				var synonyms []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym
				if e.source == sourceTopicConfig {
					synonyms = append(synonyms, synonym(e.name, e.value, sourceTopicConfig))
				}
				synonyms = append(synonyms, synonym(e.name, defaults[e.name], sourceDefaultConfig))
				add(e.name, e.value, e.source, false, synonyms)
			}

		case kmsg.ConfigResourceTypeBroker:
			if code, msg := b.checkBrokerResource(rr.ResourceName); code != 0 {
				sr.ErrorCode, sr.ErrorMessage = code, msg
				break
			}
			values, defaults := b.cfg.Values(), DefaultConfig().Values()
			for _, name := range ConfigNames() {
				source := sourceDefaultConfig
				if values[name] != defaults[name] {
					source = sourceStaticBrokerConfig
				}
				add(name, values[name], source, true, []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{synonym(name, values[name], source)})
			}

		default:
			sr.ErrorCode = kerr.InvalidRequest.Code
			sr.ErrorMessage = strp("only topic and broker config resources are supported")
		}
		resp.Resources = append(resp.Resources, sr)
	}
	return resp, nil
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
