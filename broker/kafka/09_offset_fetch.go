package kafka

// OffsetFetch (key 9), at the versions broker/group serves (group.Versions).
//
// Delegates to the group coordinator: committed offsets of one group
// (v0–v7) or several (v8+, KIP-709); -1 for partitions without a commit.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { regGroupKey(9, handleOffsetFetch) }

func handleOffsetFetch(ctx context.Context, b *Broker, r *request) (kmsg.Response, error) {
	return b.authorizedOffsetFetch(withClient(ctx, r), r, r.body.(*kmsg.OffsetFetchRequest)), nil
}
