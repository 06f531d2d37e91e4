package kafka

// OffsetDelete (key 47), at the versions broker/group serves (group.Versions).
//
// Delegates to the group coordinator, which deletes a group's committed
// offsets for the listed partitions.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { regGroupKey(47, handleOffsetDelete) }

func handleOffsetDelete(ctx context.Context, b *Broker, r *request) (kmsg.Response, error) {
	return b.authorizedOffsetDelete(withClient(ctx, r), r, r.body.(*kmsg.OffsetDeleteRequest)), nil
}
