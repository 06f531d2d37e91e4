package kafka

// FindCoordinator (key 10), versions 0–4 (v4: batched keys, KIP-699).
//
// A group key (type 0, or any key before v1) gets the live broker that
// coordinates the group (cluster.GroupCoordinator: every broker answers
// alike; a single broker coordinates every group), or
// COORDINATOR_NOT_AVAILABLE while no broker is known or the coordinator has
// no listener of the name the request came in on (the address given is
// that listener's). The other brokers answer that group's requests with
// NOT_COORDINATOR, so clients look it up again when it moves. A
// transactional ID (type 1) is coordinated by the broker a group of the
// same name would be (broker/txn keeps its state in the coordination
// store, so any broker can take it over); an empty one gets
// INVALID_REQUEST, and so does a broker without a coordination store
// (COORDINATOR_NOT_AVAILABLE). Other key types get INVALID_REQUEST. A
// group ID longer than millrace.group.id.max.bytes gets INVALID_GROUP_ID,
// as every group API answers it, and a transactional ID longer than
// millrace.transactional.id.max.bytes INVALID_REQUEST, as InitProducerId
// answers it. With an authorizer a group key needs
// Describe on the group (GROUP_AUTHORIZATION_FAILED), a transactional ID
// Describe on it (TRANSACTIONAL_ID_AUTHORIZATION_FAILED).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/acl"
)

func init() { regKey(10, 0, 4, handleFindCoordinator) }

func handleFindCoordinator(_ context.Context, b *Broker, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	find := func(key string) (code int16, msg *string, nodeID int32, host string, port int32) {
		switch req.CoordinatorType {
		case 0:
			if !b.authorized(r, acl.Group, key, acl.Describe) {
				return kerr.GroupAuthorizationFailed.Code, nil, -1, "", -1
			}
			if key != "" && !b.groups.ValidGroupID(key) {
				return kerr.InvalidGroupID.Code, strp("the group ID is longer than millrace.group.id.max.bytes"), -1, "", -1
			}
		case 1:
			if !b.authorized(r, acl.TransactionalID, key, acl.Describe) {
				return kerr.TransactionalIDAuthorizationFailed.Code, nil, -1, "", -1
			}
			if key == "" {
				return kerr.InvalidRequest.Code, strp("the transactional ID is empty"), -1, "", -1
			}
			if len(key) > b.cfg.Txn.MaxIDBytes {
				return kerr.InvalidRequest.Code, strp("the transactional ID is longer than millrace.transactional.id.max.bytes"), -1, "", -1
			}
			if _, code := b.txnCoordinator(); code != 0 {
				return code, strp("this broker has no coordination store for transactions"), -1, "", -1
			}
		default:
			return kerr.InvalidRequest.Code, strp("unknown coordinator key type"), -1, "", -1
		}
		c, _, ok := b.cluster.GroupCoordinator(key)
		if !ok {
			return kerr.CoordinatorNotAvailable.Code, strp("no live broker is known"), -1, "", -1
		}
		cHost, cPort, reachable := advertisedOn(c, b.listenerOf(r))
		if !reachable {
			return kerr.CoordinatorNotAvailable.Code, strp("the coordinator has no listener of the name this connection came in on"), -1, "", -1
		}
		return 0, nil, c.ID, cHost, cPort
	}
	if req.Version < 4 {
		resp.ErrorCode, resp.ErrorMessage, resp.NodeID, resp.Host, resp.Port = find(req.CoordinatorKey)
		return resp, nil
	}
	for _, key := range req.CoordinatorKeys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key = key
		c.ErrorCode, c.ErrorMessage, c.NodeID, c.Host, c.Port = find(key)
		resp.Coordinators = append(resp.Coordinators, c)
	}
	return resp, nil
}
