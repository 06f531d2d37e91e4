package kafka

// JoinGroup (key 11), at the versions broker/group serves (group.Versions).
//
// Delegates to the group coordinator. Blocking: the response waits until
// every member has joined or the rebalance times out, so it runs on its own
// goroutine and later requests on the connection are served meanwhile. The
// client ID and host from the connection go along for member descriptions.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { regBlockingGroupKey(11, handleJoinGroup) }

func handleJoinGroup(ctx context.Context, b *Broker, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.JoinGroupRequest)
	if resp, denied := b.groupDenied(r, req.Group); denied {
		return resp, nil
	}
	return b.groups.JoinGroup(withClient(ctx, r), req), nil
}
