package kafka

// SyncGroup (key 14), at the versions broker/group serves (group.Versions).
//
// Delegates to the group coordinator. Blocking: followers wait for the
// leader's assignment, so it runs on its own goroutine.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { regBlockingGroupKey(14, handleSyncGroup) }

func handleSyncGroup(ctx context.Context, b *Broker, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.SyncGroupRequest)
	if resp, denied := b.groupDenied(r, req.Group); denied {
		return resp, nil
	}
	return b.groups.SyncGroup(withClient(ctx, r), req), nil
}
