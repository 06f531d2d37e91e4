package kafka

// LeaveGroup (key 13), at the versions broker/group serves (group.Versions).
//
// Delegates to the group coordinator: one member (v0–v2) or a batch of
// members, static ones included (v3+, KIP-345).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { regGroupKey(13, handleLeaveGroup) }

func handleLeaveGroup(ctx context.Context, b *Broker, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.LeaveGroupRequest)
	if resp, denied := b.groupDenied(r, req.Group); denied {
		return resp, nil
	}
	return b.groups.LeaveGroup(withClient(ctx, r), req), nil
}
