package kafka

// DescribeCluster (key 60), versions 0–1 (KIP-700).
//
// Returns the cluster ID, the controller and the live brokers (their
// addresses on the listener the request came in on; brokers without it are
// left out), and the
// cluster authorized operations when asked (everything: millrace has no
// ACLs). Version 1's endpoint type 1 (brokers) is served; type 2
// (controllers, a KRaft notion) gets UNSUPPORTED_ENDPOINT_TYPE. Version 2
// (fenced brokers) is not served.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/acl"
)

func init() { regKey(60, 0, 1, handleDescribeCluster) }

func handleDescribeCluster(_ context.Context, b *Broker, r *request) (kmsg.Response, error) {
	req := r.body.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.EndpointType = 1
	if req.Version >= 1 && req.EndpointType != 1 {
		resp.EndpointType = req.EndpointType
		resp.ErrorCode = kerr.UnsupportedEndpointType.Code
		resp.ErrorMessage = strp("only the broker endpoint type (1) is supported")
		return resp, nil
	}
	resp.ClusterID = b.cluster.ClusterID()
	resp.ControllerID = b.cluster.ControllerID()
	listener := b.listenerOf(r)
	for _, info := range b.cluster.Brokers() {
		host, port, ok := advertisedOn(info, listener)
		if !ok {
			continue
		}
		rb := kmsg.NewDescribeClusterResponseBroker()
		rb.NodeID, rb.Host, rb.Port = info.ID, host, port
		if info.Rack != "" {
			rb.Rack = strp(info.Rack)
		}
		resp.Brokers = append(resp.Brokers, rb)
	}
	if req.IncludeClusterAuthorizedOperations {
		resp.ClusterAuthorizedOperations = b.authorizedOperations(r, acl.Cluster, acl.ClusterName, clusterOperations)
	}
	return resp, nil
}
