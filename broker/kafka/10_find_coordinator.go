package kafka

// FindCoordinator (key 10), versions 0–4 (v4: batched keys, KIP-699).
//
// In single-broker mode this broker coordinates every consumer group, so a
// group key (type 0, or any key before v1) gets this broker's advertised
// address. Transaction coordinators (type 1) are refused with
// INVALID_REQUEST: millrace does not support transactions (idempotent
// producers do not need a coordinator). Other key types get INVALID_REQUEST
// too.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { regKey(10, 0, 4, handleFindCoordinator) }

func handleFindCoordinator(_ context.Context, b *Broker, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	host, port := b.advertised()

	var code int16
	var msg *string
	switch req.CoordinatorType {
	case 0:
	case 1:
		code, msg = kerr.InvalidRequest.Code, strp("millrace does not support transactions")
	default:
		code, msg = kerr.InvalidRequest.Code, strp("unknown coordinator key type")
	}
	nodeID := b.cfg.BrokerID
	if code != 0 {
		nodeID, host, port = -1, "", -1
	}

	if req.Version < 4 {
		resp.ErrorCode, resp.ErrorMessage = code, msg
		resp.NodeID, resp.Host, resp.Port = nodeID, host, port
		return resp, nil
	}
	for _, key := range req.CoordinatorKeys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key, c.ErrorCode, c.ErrorMessage = key, code, msg
		c.NodeID, c.Host, c.Port = nodeID, host, port
		resp.Coordinators = append(resp.Coordinators, c)
	}
	return resp, nil
}
