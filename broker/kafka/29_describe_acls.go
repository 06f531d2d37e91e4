package kafka

// DescribeAcls (key 29), versions 0–3.
//
// Lists the ACLs a filter selects (broker/acl Filter: resource type, name
// and pattern type — ANY, MATCH, LITERAL or PREFIXED — principal, host,
// operation, permission; null strings and the ANY values match anything),
// from this broker's ACL cache, grouped by resource pattern. It needs
// Describe on the cluster (CLUSTER_AUTHORIZATION_FAILED otherwise); a
// filter naming an unknown type is INVALID_REQUEST. Version 0 knows only
// LITERAL patterns.
//
// Without an authorizer (authorizer.class.name empty) the ACL APIs (this
// one, CreateAcls and DeleteAcls) answer as Kafka does: SECURITY_DISABLED,
// with a message that says so.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/acl"
)

func init() { regKey(29, 0, 3, handleDescribeACLs) }

// noAuthorizer is the message sent with SECURITY_DISABLED.
const noAuthorizer = "no authorizer is configured (authorizer.class.name is empty)"

// aclAPI returns the authorizer for an ACL API request that needs op on
// the cluster, or nil with the error to answer: SECURITY_DISABLED without
// an authorizer, CLUSTER_AUTHORIZATION_FAILED without op.
func (b *Broker) aclAPI(r *request, op acl.Operation) (a *authorizer, code int16, msg *string) {
	a = b.authorizer
	switch {
	case a == nil:
		return nil, kerr.SecurityDisabled.Code, strp(noAuthorizer)
	case !b.authorizedCluster(r, op):
		return nil, kerr.ClusterAuthorizationFailed.Code, nil
	}
	return a, 0, nil
}

func handleDescribeACLs(_ context.Context, b *Broker, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.DescribeACLsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	a, code, msg := b.aclAPI(r, acl.Describe)
	if a == nil {
		resp.ErrorCode, resp.ErrorMessage = code, msg
		return resp, nil
	}
	f, err := aclFilter(r.version, int8(req.ResourceType), req.ResourceName, int8(req.ResourcePatternType), req.Principal, req.Host, int8(req.Operation), int8(req.PermissionType))
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = kerr.InvalidRequest.Code, strp(err.Error())
		return resp, nil
	}
	var cur *kmsg.DescribeACLsResponseResource
	for _, bind := range a.cache.Snapshot().Select(f) {
		p := bind.Pattern
		if cur == nil || cur.ResourceType != kmsg.ACLResourceType(p.Type) || cur.ResourceName != p.Name || cur.ResourcePatternType != kmsg.ACLResourcePatternType(p.PatternType) {
			res := kmsg.NewDescribeACLsResponseResource()
			res.ResourceType, res.ResourceName, res.ResourcePatternType = kmsg.ACLResourceType(p.Type), p.Name, kmsg.ACLResourcePatternType(p.PatternType)
			resp.Resources = append(resp.Resources, res)
			cur = &resp.Resources[len(resp.Resources)-1]
		}
		e := kmsg.NewDescribeACLsResponseResourceACL()
		e.Principal, e.Host = bind.Entry.Principal, bind.Entry.Host
		e.Operation, e.PermissionType = kmsg.ACLOperation(bind.Entry.Operation), kmsg.ACLPermissionType(bind.Entry.Permission)
		cur.ACLs = append(cur.ACLs, e)
	}
	return resp, nil
}

// aclFilter reads a DescribeAcls or DeleteAcls filter, refusing values
// outside Kafka's enums (UNKNOWN included) with a sentence naming them.
func aclFilter(version int16, typ int8, name *string, pattern int8, principal, host *string, op, perm int8) (acl.Filter, error) {
	f := acl.Filter{
		Type: acl.ResourceType(typ), Name: name, PatternType: acl.PatternType(pattern),
		Principal: principal, Host: host, Operation: acl.Operation(op), Permission: acl.Permission(perm),
	}
	if version == 0 {
		f.PatternType = acl.Literal // v0 predates PREFIXED (KIP-290)
	}
	switch {
	case f.Type != acl.AnyResource && !f.Type.Concrete():
		return f, fmt.Errorf("resource type %d is not one millrace knows", typ)
	case f.PatternType < acl.AnyPattern || f.PatternType > acl.Prefixed:
		return f, fmt.Errorf("pattern type %d is not one millrace knows", pattern)
	case f.Operation != acl.AnyOperation && !f.Operation.Concrete():
		return f, fmt.Errorf("operation %d is not one millrace knows", op)
	case f.Permission < acl.AnyPermission || f.Permission > acl.Allow:
		return f, fmt.Errorf("permission type %d is not one millrace knows", perm)
	}
	return f, nil
}
