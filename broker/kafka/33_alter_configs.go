package kafka

// AlterConfigs (key 33), versions 0–2.
//
// Topic resources: the listed configs replace all of the topic's overrides
// (configs not listed return to their defaults), as Kafka's non-incremental
// AlterConfigs does. Values are validated by broker/log (INVALID_CONFIG); a
// null value gets INVALID_REQUEST; an unknown topic
// UNKNOWN_TOPIC_OR_PARTITION. The new config is stored and applied to the
// topic's open logs. validate_only checks and changes nothing.
//
// Broker resources ("" for the cluster-wide defaults, or this broker's ID):
// the listed configs replace all of that resource's dynamic configs
// (brokerconfigs.go); only the broker-wide topic defaults change at runtime,
// anything else gets INVALID_REQUEST as Kafka answers a read-only config. A
// resource listed twice gets INVALID_REQUEST; other resource types too.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/acl"
)

func init() { regKey(33, 0, 2, handleAlterConfigs) }

// configResource identifies a resource for duplicate detection.
type configResource struct {
	kind kmsg.ConfigResourceType
	name string
}

func handleAlterConfigs(_ context.Context, b *Broker, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.AlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	repeated := listedTwice(req.Resources, func(rr kmsg.AlterConfigsRequestResource) configResource {
		return configResource{rr.ResourceType, rr.ResourceName}
	})
	for _, rr := range req.Resources {
		sr := kmsg.NewAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		if sr.ErrorCode = b.configResourceDenied(r, rr.ResourceType, rr.ResourceName, acl.AlterConfigs); sr.ErrorCode == 0 {
			sr.ErrorCode, sr.ErrorMessage = b.alterConfigs(rr, repeated[configResource{rr.ResourceType, rr.ResourceName}], req.ValidateOnly)
		}
		resp.Resources = append(resp.Resources, sr)
	}
	return resp, nil
}

func (b *Broker) alterConfigs(rr kmsg.AlterConfigsRequestResource, duplicate, validateOnly bool) (int16, *string) {
	if code, msg := checkTopicResource(rr.ResourceType, duplicate); code != 0 {
		return code, msg
	}
	overrides := make(map[string]string, len(rr.Configs))
	if rr.ResourceType == kmsg.ConfigResourceTypeBroker {
		for _, c := range rr.Configs {
			if c.Value == nil {
				return kerr.InvalidRequest.Code, strp("config " + c.Name + " has a null value; leave it out to return it to the default")
			}
			overrides[c.Name] = *c.Value
		}
		return b.storeBrokerConfig(rr.ResourceName, overrides, validateOnly)
	}
	for _, c := range rr.Configs {
		if c.Value == nil {
			return kerr.InvalidRequest.Code, strp("config " + c.Name + " has a null value; leave it out to return it to the default")
		}
		overrides[c.Name] = *c.Value
	}
	return b.storeTopicConfig(rr.ResourceName, overrides, validateOnly)
}

// checkTopicResource returns the error for a resource that cannot be altered
// (listed twice, or neither a topic nor a broker), or 0 for one that can.
func checkTopicResource(kind kmsg.ConfigResourceType, duplicate bool) (int16, *string) {
	if duplicate {
		return kerr.InvalidRequest.Code, strp("the resource is listed more than once in the request")
	}
	switch kind {
	case kmsg.ConfigResourceTypeTopic:
		return 0, nil
	case kmsg.ConfigResourceTypeBroker:
		return 0, nil
	default:
		return kerr.InvalidRequest.Code, strp("only topic and broker config resources can be altered")
	}
}

// storeTopicConfig replaces a topic's overrides (or only validates them).
func (b *Broker) storeTopicConfig(topic string, overrides map[string]string, validateOnly bool) (int16, *string) {
	if err := b.cluster.AlterConfig(topic, overrides, validateOnly); err != nil {
		if !isClientError(err) {
			b.logger.Error("altering a topic config", "topic", topic, "err", err)
		}
		return clusterErrorCode(err)
	}
	if !validateOnly {
		b.warnIgnoredTopicConfigs(topic, overrides)
	}
	return 0, nil
}
