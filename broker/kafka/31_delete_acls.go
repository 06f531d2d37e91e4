package kafka

// DeleteAcls (key 31), versions 0–3.
//
// Deletes, per filter (as DescribeAcls reads them), every stored ACL the
// filter selects — read from the coordination store, not the cache, so
// nothing another broker added a moment ago is missed — and answers with
// the ACLs deleted. It needs Alter on the cluster
// (CLUSTER_AUTHORIZATION_FAILED for every filter otherwise); a filter with
// an unknown value is INVALID_REQUEST. SECURITY_DISABLED without an
// authorizer (see 29_describe_acls.go).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/acl"
)

func init() { regKey(31, 0, 3, handleDeleteACLs) }

func handleDeleteACLs(_ context.Context, b *Broker, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.DeleteACLsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	resp.Results = make([]kmsg.DeleteACLsResponseResult, len(req.Filters))
	for i := range resp.Results {
		resp.Results[i] = kmsg.NewDeleteACLsResponseResult()
	}
	a, code, msg := b.aclAPI(r, acl.Alter)
	if a == nil {
		for i := range resp.Results {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = code, msg
		}
		return resp, nil
	}
	var (
		filters []acl.Filter
		index   []int // filters[j] is request filter index[j]
	)
	for i, f := range req.Filters {
		filter, err := aclFilter(r.version, int8(f.ResourceType), f.ResourceName, int8(f.ResourcePatternType), f.Principal, f.Host, int8(f.Operation), int8(f.PermissionType))
		if err != nil {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = kerr.InvalidRequest.Code, strp(err.Error())
			continue
		}
		filters = append(filters, filter)
		index = append(index, i)
	}
	removed, errs := acl.Remove(b.store, filters)
	var changed []acl.Pattern
	for j := range filters {
		res := &resp.Results[index[j]]
		if errs[j] != nil {
			b.logger.Error("deleting ACLs failed", "err", errs[j])
			res.ErrorCode, res.ErrorMessage = kerr.UnknownServerError.Code, strp(errs[j].Error())
		}
		for _, bind := range removed[j] {
			m := kmsg.NewDeleteACLsResponseResultMatchingACL()
			m.ResourceType, m.ResourceName, m.ResourcePatternType = kmsg.ACLResourceType(bind.Pattern.Type), bind.Pattern.Name, kmsg.ACLResourcePatternType(bind.Pattern.PatternType)
			m.Principal, m.Host = bind.Entry.Principal, bind.Entry.Host
			m.Operation, m.PermissionType = kmsg.ACLOperation(bind.Entry.Operation), kmsg.ACLPermissionType(bind.Entry.Permission)
			res.MatchingACLs = append(res.MatchingACLs, m)
			changed = append(changed, bind.Pattern)
		}
	}
	if err := a.cache.Refresh(changed); err != nil {
		b.logger.Warn("re-reading deleted ACLs failed; the change notification will bring the change", "err", err)
	}
	return resp, nil
}
