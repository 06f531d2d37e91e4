package kafka

// IncrementalAlterConfigs (key 44), versions 0–1 (KIP-339).
//
// Topic resources: each config is changed by its operation, starting from
// the topic's current overrides: SET (0) sets an override, DELETE (1) removes
// it (back to the default), APPEND (2) and SUBTRACT (3) add or remove items
// of a list config (cleanup.policy) starting from its effective value;
// on other configs they get INVALID_CONFIG. Values are validated by broker/log
// (INVALID_CONFIG); a null value for SET, APPEND or SUBTRACT, a config listed
// twice in a resource, an unknown operation or a resource listed twice gets
// INVALID_REQUEST. validate_only checks and changes nothing.
//
// Broker resources ("" for the cluster-wide defaults, or this broker's ID):
// the same operations on that resource's dynamic configs, by broker config
// name (log.retention.ms, min.insync.replicas, log.cleanup.policy, ...);
// configs Kafka treats as read-only get INVALID_REQUEST (brokerconfigs.go).

import (
	"context"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/acl"
)

func init() { regKey(44, 0, 1, handleIncrementalAlterConfigs) }

func handleIncrementalAlterConfigs(_ context.Context, b *Broker, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.IncrementalAlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	repeated := listedTwice(req.Resources, func(rr kmsg.IncrementalAlterConfigsRequestResource) configResource {
		return configResource{rr.ResourceType, rr.ResourceName}
	})
	for _, rr := range req.Resources {
		sr := kmsg.NewIncrementalAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		if sr.ErrorCode = b.configResourceDenied(r, rr.ResourceType, rr.ResourceName, acl.AlterConfigs); sr.ErrorCode == 0 {
			sr.ErrorCode, sr.ErrorMessage = b.incrementalAlterConfigs(rr, repeated[configResource{rr.ResourceType, rr.ResourceName}], req.ValidateOnly)
		}
		resp.Resources = append(resp.Resources, sr)
	}
	return resp, nil
}

func (b *Broker) incrementalAlterConfigs(rr kmsg.IncrementalAlterConfigsRequestResource, duplicate, validateOnly bool) (int16, *string) {
	if code, msg := checkTopicResource(rr.ResourceType, duplicate); code != 0 {
		return code, msg
	}
	var values, overrides map[string]string
	var err error
	if rr.ResourceType == kmsg.ConfigResourceTypeBroker {
		if code, msg := b.checkBrokerResource(rr.ResourceName); code != 0 {
			return code, msg
		}
		values, overrides, err = b.brokerConfigValues(rr.ResourceName)
	} else {
		values, overrides, err = b.cluster.TopicConfigValues(rr.ResourceName)
	}
	if err != nil {
		return clusterErrorCode(err)
	}
	seen := make(map[string]bool, len(rr.Configs))
	for _, c := range rr.Configs {
		if seen[c.Name] {
			return kerr.InvalidRequest.Code, strp("config " + c.Name + " is listed more than once")
		}
		seen[c.Name] = true
		if c.Op != kmsg.IncrementalAlterConfigOpDelete && c.Value == nil {
			return kerr.InvalidRequest.Code, strp("config " + c.Name + " has a null value")
		}
		switch c.Op {
		case kmsg.IncrementalAlterConfigOpSet:
			overrides[c.Name] = *c.Value
		case kmsg.IncrementalAlterConfigOpDelete:
			delete(overrides, c.Name)
		case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
			if !isListConfig(rr.ResourceType, c.Name) {
				return kerr.InvalidConfig.Code, strp("config " + c.Name + " is not a list; APPEND and SUBTRACT apply to list configs only")
			}
			items := splitList(values[c.Name])
			for _, item := range splitList(*c.Value) {
				has := slices.Contains(items, item)
				switch {
				case c.Op == kmsg.IncrementalAlterConfigOpAppend && !has:
					items = append(items, item)
				case c.Op == kmsg.IncrementalAlterConfigOpSubtract && has:
					items = slices.DeleteFunc(items, func(s string) bool { return s == item })
				}
			}
			overrides[c.Name] = strings.Join(items, ",")
		default:
			return kerr.InvalidRequest.Code, strp("unknown operation " + c.Op.String())
		}
	}
	if rr.ResourceType == kmsg.ConfigResourceTypeBroker {
		return b.storeBrokerConfig(rr.ResourceName, overrides, validateOnly)
	}
	return b.storeTopicConfig(rr.ResourceName, overrides, validateOnly)
}
