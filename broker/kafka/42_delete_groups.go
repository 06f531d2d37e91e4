package kafka

// DeleteGroups (key 42), at the versions broker/group serves (group.Versions).
//
// Delegates to the group coordinator: empty groups are deleted with their
// committed offsets; a group with members gets NON_EMPTY_GROUP.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { regGroupKey(42, handleDeleteGroups) }

func handleDeleteGroups(ctx context.Context, b *Broker, r *request) (kmsg.Response, error) {
	return b.authorizedDeleteGroups(withClient(ctx, r), r, r.body.(*kmsg.DeleteGroupsRequest)), nil
}
