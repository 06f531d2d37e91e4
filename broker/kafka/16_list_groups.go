package kafka

// ListGroups (key 16), at the versions broker/group serves (group.Versions).
//
// Delegates to the group coordinator: every group with its protocol type
// (and state from v4, type from v5, with their filters).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { regGroupKey(16, handleListGroups) }

func handleListGroups(ctx context.Context, b *Broker, r *request) (kmsg.Response, error) {
	return b.authorizedListGroups(withClient(ctx, r), r, r.body.(*kmsg.ListGroupsRequest)), nil
}
