package kafka

// Authorization of the group APIs, which the group coordinator serves
// without knowing principals: these wrappers check what Kafka checks
// before handing the request on, and fill in the denials.
//
//	JoinGroup, SyncGroup, Heartbeat, LeaveGroup  Read on the group
//	OffsetCommit                                 Read on the group, Read on each topic
//	OffsetFetch                                  Describe on the group, Describe on each topic
//	OffsetDelete                                 Delete on the group, Read on each topic
//	DescribeGroups                               Describe on each group
//	DeleteGroups                                 Delete on each group
//	ListGroups                                   Describe on the cluster, else the groups
//	                                             the principal may Describe
//
// A group denial is GROUP_AUTHORIZATION_FAILED, a topic denial
// TOPIC_AUTHORIZATION_FAILED for that topic's partitions while the others
// are served.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/acl"
)

// groupDenied answers a single-group request (JoinGroup, SyncGroup,
// Heartbeat, LeaveGroup) with GROUP_AUTHORIZATION_FAILED when the
// principal may not Read the group; ok is false when it may.
func (b *Broker) groupDenied(r *request, group string) (resp kmsg.Response, denied bool) {
	if b.authorized(r, acl.Group, group, acl.Read) {
		return nil, false
	}
	code := kerr.GroupAuthorizationFailed.Code
	switch resp := r.body.ResponseKind().(type) {
	case *kmsg.JoinGroupResponse:
		resp.ErrorCode, resp.Generation = code, -1
		return resp, true
	case *kmsg.SyncGroupResponse:
		resp.ErrorCode = code
		return resp, true
	case *kmsg.HeartbeatResponse:
		resp.ErrorCode = code
		return resp, true
	case *kmsg.LeaveGroupResponse:
		resp.ErrorCode = code
		return resp, true
	}
	return nil, false
}

// authorizedOffsetCommit serves an OffsetCommit the principal may make in
// part: topics it may not Read get TOPIC_AUTHORIZATION_FAILED and are not
// committed.
func (b *Broker) authorizedOffsetCommit(ctx context.Context, r *request, req *kmsg.OffsetCommitRequest) kmsg.Response {
	groupOK := b.authorized(r, acl.Group, req.Group, acl.Read)
	allowed := make([]kmsg.OffsetCommitRequestTopic, 0, len(req.Topics))
	var denied []kmsg.OffsetCommitResponseTopic
	for _, t := range req.Topics {
		if groupOK && b.authorized(r, acl.Topic, t.Topic, acl.Read) {
			allowed = append(allowed, t)
			continue
		}
		code := kerr.TopicAuthorizationFailed.Code
		if !groupOK {
			code = kerr.GroupAuthorizationFailed.Code
		}
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		denied = append(denied, rt)
	}
	if len(denied) == 0 {
		return b.groups.OffsetCommit(ctx, req)
	}
	if len(allowed) == 0 {
		resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
		resp.Topics = denied
		return resp
	}
	part := *req
	part.Topics = allowed
	resp := b.groups.OffsetCommit(ctx, &part)
	resp.Topics = append(resp.Topics, denied...)
	return resp
}

// authorizedOffsetFetch serves an OffsetFetch: a group the principal may
// not Describe gets GROUP_AUTHORIZATION_FAILED, a named topic it may not
// Describe TOPIC_AUTHORIZATION_FAILED per partition, and a request for
// every topic (null list) sees only the topics it may Describe.
func (b *Broker) authorizedOffsetFetch(ctx context.Context, r *request, req *kmsg.OffsetFetchRequest) kmsg.Response {
	if b.authorizer == nil {
		return b.groups.OffsetFetch(ctx, req)
	}
	if req.Version < 8 {
		if !b.authorized(r, acl.Group, req.Group, acl.Describe) {
			resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
			resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
			return resp
		}
		resp := b.groups.OffsetFetch(ctx, req)
		kept := resp.Topics[:0]
		for _, t := range resp.Topics {
			if !b.authorized(r, acl.Topic, t.Topic, acl.Describe) {
				if req.Topics == nil {
					continue
				}
				for i := range t.Partitions {
					p := &t.Partitions[i]
					p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode = -1, -1, nil, kerr.TopicAuthorizationFailed.Code
				}
			}
			kept = append(kept, t)
		}
		resp.Topics = kept
		return resp
	}
	// v8+: several groups; the denied ones are answered here, the others
	// by the coordinator.
	part := *req
	part.Groups = nil
	deniedGroups := map[string]bool{}
	for _, g := range req.Groups {
		if b.authorized(r, acl.Group, g.Group, acl.Describe) {
			part.Groups = append(part.Groups, g)
		} else {
			deniedGroups[g.Group] = true
		}
	}
	of := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if len(part.Groups) > 0 {
		of = b.groups.OffsetFetch(ctx, &part)
	}
	named := map[string]bool{}
	for _, g := range req.Groups {
		named[g.Group] = g.Topics != nil
	}
	for gi := range of.Groups {
		g := &of.Groups[gi]
		kept := g.Topics[:0]
		for _, t := range g.Topics {
			if !b.authorized(r, acl.Topic, t.Topic, acl.Describe) {
				if !named[g.Group] {
					continue
				}
				for i := range t.Partitions {
					p := &t.Partitions[i]
					p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode = -1, -1, nil, kerr.TopicAuthorizationFailed.Code
				}
			}
			kept = append(kept, t)
		}
		g.Topics = kept
	}
	for _, g := range req.Groups {
		if deniedGroups[g.Group] {
			rg := kmsg.NewOffsetFetchResponseGroup()
			rg.Group, rg.ErrorCode = g.Group, kerr.GroupAuthorizationFailed.Code
			of.Groups = append(of.Groups, rg)
		}
	}
	return of
}

// authorizedOffsetDelete serves an OffsetDelete: Delete on the group, and
// Read on each topic whose offsets go.
func (b *Broker) authorizedOffsetDelete(ctx context.Context, r *request, req *kmsg.OffsetDeleteRequest) kmsg.Response {
	if !b.authorized(r, acl.Group, req.Group, acl.Delete) {
		resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp
	}
	allowed := make([]kmsg.OffsetDeleteRequestTopic, 0, len(req.Topics))
	var denied []kmsg.OffsetDeleteResponseTopic
	for _, t := range req.Topics {
		if b.authorized(r, acl.Topic, t.Topic, acl.Read) {
			allowed = append(allowed, t)
			continue
		}
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, kerr.TopicAuthorizationFailed.Code
			rt.Partitions = append(rt.Partitions, rp)
		}
		denied = append(denied, rt)
	}
	if len(denied) == 0 {
		return b.groups.OffsetDelete(ctx, req)
	}
	part := *req
	part.Topics = allowed
	resp := b.groups.OffsetDelete(ctx, &part)
	if resp.ErrorCode == 0 {
		resp.Topics = append(resp.Topics, denied...)
	}
	return resp
}

// authorizedDescribeGroups describes the groups the principal may
// Describe; the others get GROUP_AUTHORIZATION_FAILED, in request order.
func (b *Broker) authorizedDescribeGroups(ctx context.Context, r *request, req *kmsg.DescribeGroupsRequest) kmsg.Response {
	part := *req
	part.Groups = nil
	for _, g := range req.Groups {
		if b.authorized(r, acl.Group, g, acl.Describe) {
			part.Groups = append(part.Groups, g)
		}
	}
	if len(part.Groups) == len(req.Groups) {
		resp := b.groups.DescribeGroups(ctx, req)
		b.groupOperations(r, req.IncludeAuthorizedOperations, resp)
		return resp
	}
	dg := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	if len(part.Groups) > 0 {
		dg = b.groups.DescribeGroups(ctx, &part)
	}
	b.groupOperations(r, req.IncludeAuthorizedOperations, dg)
	served := dg.Groups
	dg.Groups = make([]kmsg.DescribeGroupsResponseGroup, 0, len(req.Groups))
	for _, g := range req.Groups {
		if len(served) > 0 && served[0].Group == g {
			dg.Groups = append(dg.Groups, served[0])
			served = served[1:]
			continue
		}
		rg := kmsg.NewDescribeGroupsResponseGroup()
		rg.Group, rg.ErrorCode = g, kerr.GroupAuthorizationFailed.Code
		dg.Groups = append(dg.Groups, rg)
	}
	return dg
}

// groupOperations reports, when asked and an authorizer is on, the
// operations the ACLs allow on each described group (KIP-430).
func (b *Broker) groupOperations(r *request, asked bool, dg *kmsg.DescribeGroupsResponse) {
	if !asked || b.authorizer == nil {
		return
	}
	const groupOps = 1<<acl.Read | 1<<acl.Delete | 1<<acl.Describe
	for i := range dg.Groups {
		if dg.Groups[i].ErrorCode == 0 {
			dg.Groups[i].AuthorizedOperations = b.authorizedOperations(r, acl.Group, dg.Groups[i].Group, groupOps)
		}
	}
}

// authorizedListGroups lists every group for a principal with Describe on
// the cluster, else the groups it may Describe.
func (b *Broker) authorizedListGroups(ctx context.Context, r *request, req *kmsg.ListGroupsRequest) kmsg.Response {
	lg := b.groups.ListGroups(ctx, req)
	if b.authorizer == nil || b.allowed(r, acl.Cluster, acl.ClusterName, acl.Describe) {
		return lg
	}
	kept := lg.Groups[:0]
	for _, g := range lg.Groups {
		if b.allowed(r, acl.Group, g.Group, acl.Describe) {
			kept = append(kept, g)
		}
	}
	lg.Groups = kept
	return lg
}

// authorizedDeleteGroups deletes the groups the principal may Delete; the
// others get GROUP_AUTHORIZATION_FAILED.
func (b *Broker) authorizedDeleteGroups(ctx context.Context, r *request, req *kmsg.DeleteGroupsRequest) kmsg.Response {
	part := *req
	part.Groups = nil
	var denied []kmsg.DeleteGroupsResponseGroup
	for _, g := range req.Groups {
		if b.authorized(r, acl.Group, g, acl.Delete) {
			part.Groups = append(part.Groups, g)
			continue
		}
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group, rg.ErrorCode = g, kerr.GroupAuthorizationFailed.Code
		denied = append(denied, rg)
	}
	if len(denied) == 0 {
		return b.groups.DeleteGroups(ctx, req)
	}
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	if len(part.Groups) > 0 {
		resp = b.groups.DeleteGroups(ctx, &part)
	}
	resp.Groups = append(resp.Groups, denied...)
	return resp
}
