package kafka

// DescribeClientQuotas (key 48), versions 0-1 (KIP-546; v1 is flexible).
//
// Lists the client quotas stored in the coordination store (broker/quota)
// whose entity matches the filter: each component names an entity type
// (user, client-id, ip) and matches it exactly (a name; for an ip, any
// spelling of the address), as the default, or any; with strict,
// entities with other types are left out, so {user: any, strict} lists
// user quotas but not user+client-id ones. A filter with no components
// lists every entity, ip entities (connection_creation_rate, KIP-612)
// included; one naming a user or a client-id lists no ip entity, and one
// naming an ip only ip entities. A default's name is null. Only quota
// keys are listed, never the SCRAM credentials that share a user's node.
// Errors are for the whole request: INVALID_REQUEST for an unknown
// entity type or match type, a type named twice, an exact match without
// a name, or an ip component beside a user or client-id one (Kafka's
// rule);
// CLUSTER_AUTHORIZATION_FAILED without DescribeConfigs on the cluster
// when an authorizer is on, as in Kafka. It reads the store, not the
// quota cache, so a change made through any broker shows at once.

import (
	"context"
	"errors"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/acl"
	"millrace/broker/quota"
)

func init() { regKey(48, 0, 1, handleDescribeClientQuotas) }

func handleDescribeClientQuotas(_ context.Context, b *Broker, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.DescribeClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	if !b.authorizedCluster(r, acl.DescribeConfigs) {
		resp.ErrorCode, resp.ErrorMessage = kerr.ClusterAuthorizationFailed.Code, strp("Describing client quotas needs DescribeConfigs on the cluster")
		return resp, nil
	}
	filter := quota.Filter{Strict: req.Strict}
	for _, c := range req.Components {
		filter.Components = append(filter.Components, quota.FilterComponent{Type: c.EntityType, Match: quota.MatchType(c.MatchType), Name: c.Match})
	}
	if err := filter.Validate(); err != nil {
		resp.ErrorCode, resp.ErrorMessage = kerr.InvalidRequest.Code, strp(err.Error())
		return resp, nil
	}
	if b.store == nil {
		resp.ErrorCode, resp.ErrorMessage = kerr.UnknownServerError.Code, strp("no coordination store")
		return resp, nil
	}
	all, err := quota.List(b.store)
	if err != nil {
		b.logger.Error("listing client quotas", "err", err)
		resp.ErrorCode, resp.ErrorMessage = kerr.UnknownServerError.Code, strp("reading the client quotas failed")
		return resp, nil
	}
	entities := make([]quota.Entity, 0, len(all))
	for e := range all {
		if filter.Matches(e) {
			entities = append(entities, e)
		}
	}
	sort.Slice(entities, func(i, j int) bool { return entities[i].Path() < entities[j].Path() })
	for _, e := range entities {
		entry := kmsg.NewDescribeClientQuotasResponseEntry()
		for _, c := range e.Components() {
			ent := kmsg.NewDescribeClientQuotasResponseEntryEntity()
			ent.Type, ent.Name = c.Type, c.Name
			entry.Entity = append(entry.Entity, ent)
		}
		for _, k := range e.Kinds() {
			if v, ok := all[e][k]; ok {
				value := kmsg.NewDescribeClientQuotasResponseEntryValue()
				value.Key, value.Value = string(k), v
				entry.Values = append(entry.Values, value)
			}
		}
		resp.Entries = append(resp.Entries, entry)
	}
	return resp, nil
}

// quotaRequestError maps a broker/quota error to its Kafka error.
func quotaRequestError(err error) (*kerr.Error, string) {
	if errors.Is(err, quota.ErrInvalid) {
		return kerr.InvalidRequest, err.Error()
	}
	return kerr.UnknownServerError, "writing the client quotas failed"
}
