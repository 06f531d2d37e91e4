package kafka

// AlterClientQuotas (key 49), versions 0-1 (KIP-546; v1 is flexible).
//
// Sets and removes client quotas in the coordination store (broker/quota),
// at Kafka's znodes (/config/users/<user>, /config/clients/<client-id>,
// /config/users/<user>/clients/<client-id>, /config/ips/<ip>, <default>
// for a null name), each write with a change notification every broker's
// quota manager follows. An ip entity's one quota is
// connection_creation_rate (KIP-612), enforced on accept
// (conn_rate.go). One result per entry, with the entry's entity; an entry
// with an error has none of its operations applied, the others are:
//
//   - INVALID_REQUEST: an empty entity, a type named twice, an unknown
//     type, an ip with a user or a client-id, an ip name that is not an
//     address (host names are not resolved), an empty name, an unknown
//     quota key, a key the entity's type does not have
//     (connection_creation_rate on a user or client-id, a client quota on
//     an ip), a key altered twice, a negative or non-finite value, a byte
//     rate that is not a whole number, or a connection rate that is not a
//     whole number up to 2147483647;
//   - CLUSTER_AUTHORIZATION_FAILED: no AlterConfigs on the cluster when
//     an authorizer is on, as in Kafka (every entry).
//
// With validate_only nothing is written. Removing a key that is not set
// is not an error, as in Kafka.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/acl"
	"millrace/broker/quota"
)

func init() { regKey(49, 0, 1, handleAlterClientQuotas) }

func handleAlterClientQuotas(_ context.Context, b *Broker, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.AlterClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	authorized := b.authorizedCluster(r, acl.AlterConfigs)
	for _, entry := range req.Entries {
		result := kmsg.NewAlterClientQuotasResponseEntry()
		components := make([]quota.Component, 0, len(entry.Entity))
		for _, c := range entry.Entity {
			ent := kmsg.NewAlterClientQuotasResponseEntryEntity()
			ent.Type, ent.Name = c.Type, c.Name
			result.Entity = append(result.Entity, ent)
			components = append(components, quota.Component{Type: c.Type, Name: c.Name})
		}
		fail := func(err *kerr.Error, message string) {
			result.ErrorCode, result.ErrorMessage = err.Code, strp(message)
		}
		switch entity, set, remove, err := alteration(components, entry.Ops); {
		case !authorized:
			fail(kerr.ClusterAuthorizationFailed, "Altering client quotas needs AlterConfigs on the cluster")
		case err != nil:
			fail(quotaRequestError(err))
		case b.store == nil:
			fail(kerr.UnknownServerError, "no coordination store")
		case req.ValidateOnly:
		default:
			if err := quota.Alter(b.store, entity, set, remove); err != nil {
				b.logger.Error("altering client quotas", "entity", entity.String(), "err", err)
				fail(quotaRequestError(err))
			}
		}
		resp.Entries = append(resp.Entries, result)
	}
	return resp, nil
}

// alteration validates one entry: its entity, and its operations as
// values to set and keys to remove.
func alteration(components []quota.Component, kops []kmsg.AlterClientQuotasRequestEntryOp) (quota.Entity, map[quota.Kind]float64, []quota.Kind, error) {
	entity, err := quota.ParseEntity(components)
	if err != nil {
		return entity, nil, nil, err
	}
	ops := make([]quota.Op, 0, len(kops))
	for _, op := range kops {
		ops = append(ops, quota.Op{Key: op.Key, Value: op.Value, Remove: op.Remove})
	}
	set, remove, err := quota.ParseOps(entity, ops)
	return entity, set, remove, err
}
