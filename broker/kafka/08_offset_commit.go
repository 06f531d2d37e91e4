package kafka

// OffsetCommit (key 8), at the versions broker/group serves (group.Versions).
//
// Delegates to the group coordinator, which stores committed offsets in the
// coordination store at /consumers/<group>/offsets/<topic>/<p>. Partitions
// that do not exist get UNKNOWN_TOPIC_OR_PARTITION (the coordinator asks the
// cluster through group.Config.PartitionExists).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { regGroupKey(8, handleOffsetCommit) }

func handleOffsetCommit(ctx context.Context, b *Broker, r *request) (kmsg.Response, error) {
	return b.authorizedOffsetCommit(withClient(ctx, r), r, r.body.(*kmsg.OffsetCommitRequest)), nil
}
