package kafka

// CreateAcls (key 30), versions 0–3.
//
// Stores each ACL in the coordination store (broker/acl: Kafka's
// /kafka-acl layout, with a change notification that every broker's cache
// follows) and re-reads it into this broker's cache before answering, so
// that a DescribeAcls on the same broker sees it at once. It needs Alter
// on the cluster (CLUSTER_AUTHORIZATION_FAILED for every creation
// otherwise). A creation that cannot be stored (an ANY or MATCH value, a
// principal that is not "Type:name", a cluster not named kafka-cluster, a
// name with '/') gets INVALID_REQUEST with the reason; a store failure
// UNKNOWN_SERVER_ERROR. Creating an ACL that exists already succeeds and
// stores nothing. Version 0 creates LITERAL patterns.
// SECURITY_DISABLED without an authorizer (see 29_describe_acls.go).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/acl"
)

func init() { regKey(30, 0, 3, handleCreateACLs) }

func handleCreateACLs(_ context.Context, b *Broker, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.CreateACLsRequest)
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	resp.Results = make([]kmsg.CreateACLsResponseResult, len(req.Creations))
	for i := range resp.Results {
		resp.Results[i] = kmsg.NewCreateACLsResponseResult()
	}
	a, code, msg := b.aclAPI(r, acl.Alter)
	if a == nil {
		for i := range resp.Results {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = code, msg
		}
		return resp, nil
	}
	var (
		bindings []acl.Binding
		index    []int // bindings[j] is creation index[j]
	)
	for i, c := range req.Creations {
		bind := acl.Binding{
			Pattern: acl.Pattern{Type: acl.ResourceType(c.ResourceType), Name: c.ResourceName, PatternType: acl.PatternType(c.ResourcePatternType)},
			Entry:   acl.Entry{Principal: c.Principal, Host: c.Host, Operation: acl.Operation(c.Operation), Permission: acl.Permission(c.PermissionType)},
		}
		if r.version == 0 {
			bind.Pattern.PatternType = acl.Literal
		}
		if err := bind.Validate(); err != nil {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = kerr.InvalidRequest.Code, strp(err.Error())
			continue
		}
		bindings = append(bindings, bind)
		index = append(index, i)
	}
	var changed []acl.Pattern
	for j, err := range acl.Add(b.store, bindings) {
		if err != nil {
			b.logger.Error("storing an ACL failed", "acl", bindings[j].Pattern.String(), "err", err)
			resp.Results[index[j]].ErrorCode, resp.Results[index[j]].ErrorMessage = kerr.UnknownServerError.Code, strp(err.Error())
			continue
		}
		changed = append(changed, bindings[j].Pattern)
	}
	if err := a.cache.Refresh(changed); err != nil {
		b.logger.Warn("re-reading created ACLs failed; the change notification will bring them", "err", err)
	}
	return resp, nil
}
