package kafka

// DescribeAcls (key 29), versions 0–3.
//
// millrace has no authorizer (nor SASL or TLS), so the ACL APIs (this one,
// CreateAcls and DeleteAcls) answer as Kafka does when none is configured:
// SECURITY_DISABLED, with a message that says so. Tools and UIs that list
// ACLs then report that ACLs are disabled instead of failing on an API the
// broker does not know.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { regKey(29, 0, 3, handleDescribeACLs) }

// noAuthorizer is the message sent with SECURITY_DISABLED.
const noAuthorizer = "no authorizer is configured: millrace has no ACLs"

func handleDescribeACLs(_ context.Context, _ *Broker, r *request) (kmsg.Response, error) {
	resp := r.body.(*kmsg.DescribeACLsRequest).ResponseKind().(*kmsg.DescribeACLsResponse)
	resp.ErrorCode, resp.ErrorMessage = kerr.SecurityDisabled.Code, strp(noAuthorizer)
	return resp, nil
}
