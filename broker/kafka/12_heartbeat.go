package kafka

// Heartbeat (key 12), at the versions broker/group serves (group.Versions).
//
// Delegates to the group coordinator; answers at once (REBALANCE_IN_PROGRESS
// tells a member to rejoin).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { regGroupKey(12, handleHeartbeat) }

func handleHeartbeat(ctx context.Context, b *Broker, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.HeartbeatRequest)
	if resp, denied := b.groupDenied(r, req.Group); denied {
		return resp, nil
	}
	return b.groups.Heartbeat(withClient(ctx, r), req), nil
}
