package kafka

// CreateAcls (key 30), versions 0–3: SECURITY_DISABLED for every creation
// (no authorizer; see 29_describe_acls.go).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { regKey(30, 0, 3, handleCreateACLs) }

func handleCreateACLs(_ context.Context, _ *Broker, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.CreateACLsRequest)
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	for range req.Creations {
		res := kmsg.NewCreateACLsResponseResult()
		res.ErrorCode, res.ErrorMessage = kerr.SecurityDisabled.Code, strp(noAuthorizer)
		resp.Results = append(resp.Results, res)
	}
	return resp, nil
}
