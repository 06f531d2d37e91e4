package kafka

// ElectLeaders (key 43), versions 0–2 (KIP-183, KIP-460).
//
// Served by the controller (cluster.Elect); any other broker answers
// NOT_CONTROLLER, in every partition and, from v1, at the top, so clients
// look for the controller again. Preferred (v0, or election_type 0) makes
// each partition's first replica the leader: ELECTION_NOT_NEEDED when it
// leads already, PREFERRED_LEADER_NOT_AVAILABLE when it is not alive and
// in sync. Unclean (1) elects for a partition whose leader is gone, an
// alive in-sync replica if there is one, else any alive replica (records
// may be lost): ELECTION_NOT_NEEDED when the leader is alive,
// ELIGIBLE_LEADERS_NOT_AVAILABLE when no replica is. Null topics means
// every partition. The new state is written when the response goes out;
// the brokers take it up as they do the controller's own elections.

import (
	"context"
	"errors"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/acl"
	"millrace/broker/cluster"
	"millrace/broker/log"
)

func init() { regKey(43, 0, 2, handleElectLeaders) }

var errBadElectionType = errors.New("election type must be 0 (preferred) or 1 (unclean)")

func handleElectLeaders(_ context.Context, b *Broker, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.ElectLeadersRequest)
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	if !b.authorizedCluster(r, acl.Alter) {
		// As Kafka: the partitions named, none for all partitions.
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		for _, t := range req.Topics {
			rt := kmsg.NewElectLeadersResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewElectLeadersResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p, kerr.ClusterAuthorizationFailed.Code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil
	}
	var partitions []log.TopicPartition
	if req.Topics == nil {
		for _, t := range b.cluster.Topics() {
			for _, p := range t.Partitions {
				partitions = append(partitions, log.TopicPartition{Topic: t.Name, Partition: p.Partition})
			}
		}
		sort.Slice(partitions, func(i, j int) bool {
			a, c := partitions[i], partitions[j]
			return a.Topic < c.Topic || a.Topic == c.Topic && a.Partition < c.Partition
		})
	} else {
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				partitions = append(partitions, log.TopicPartition{Topic: t.Topic, Partition: p})
			}
		}
	}
	kind := cluster.ElectPreferred
	if req.Version >= 1 {
		kind = cluster.ElectionType(req.ElectionType)
	}
	var (
		errs []error
		all  error // the answer for every partition, when there is one
	)
	if kind != cluster.ElectPreferred && kind != cluster.ElectUnclean {
		all = errBadElectionType
	} else {
		var err error
		if errs, err = b.cluster.Elect(kind, partitions); err != nil {
			all = err
		}
	}
	if errors.Is(all, cluster.ErrNotController) && req.Version >= 1 {
		resp.ErrorCode = kerr.NotController.Code
	}
	for i, tp := range partitions {
		if n := len(resp.Topics); n == 0 || resp.Topics[n-1].Topic != tp.Topic {
			t := kmsg.NewElectLeadersResponseTopic()
			t.Topic = tp.Topic
			resp.Topics = append(resp.Topics, t)
		}
		p := kmsg.NewElectLeadersResponseTopicPartition()
		p.Partition = tp.Partition
		err := all
		if err == nil {
			err = errs[i]
		}
		switch {
		case errors.Is(err, cluster.ErrNotController):
			p.ErrorCode = kerr.NotController.Code
		case errors.Is(err, errBadElectionType):
			p.ErrorCode, p.ErrorMessage = kerr.InvalidRequest.Code, strp(err.Error())
		default:
			if err != nil && !isClientError(err) {
				b.logger.Error("leader election", "topic", tp.Topic, "partition", tp.Partition, "err", err)
			}
			p.ErrorCode, p.ErrorMessage = clusterErrorCode(err)
		}
		t := &resp.Topics[len(resp.Topics)-1]
		t.Partitions = append(t.Partitions, p)
	}
	return resp, nil
}
