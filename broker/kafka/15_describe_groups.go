package kafka

// DescribeGroups (key 15), at the versions broker/group serves (group.Versions).
//
// Delegates to the group coordinator: state, protocol and members of each
// group.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { regGroupKey(15, handleDescribeGroups) }

func handleDescribeGroups(ctx context.Context, b *Broker, r *request) (kmsg.Response, error) {
	return b.authorizedDescribeGroups(withClient(ctx, r), r, r.body.(*kmsg.DescribeGroupsRequest)), nil
}
