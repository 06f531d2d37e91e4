package kafka

// DeleteAcls (key 31), versions 0–3: SECURITY_DISABLED for every filter
// (no authorizer; see 29_describe_acls.go).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { regKey(31, 0, 3, handleDeleteACLs) }

func handleDeleteACLs(_ context.Context, _ *Broker, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.DeleteACLsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	for range req.Filters {
		res := kmsg.NewDeleteACLsResponseResult()
		res.ErrorCode, res.ErrorMessage = kerr.SecurityDisabled.Code, strp(noAuthorizer)
		resp.Results = append(resp.Results, res)
	}
	return resp, nil
}
