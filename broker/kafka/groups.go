package kafka

import (
	"context"
	"fmt"

	"millrace/broker/group"
)

// groupVersions returns the versions broker/group serves for an API key, so
// the group API files advertise exactly what the coordinator implements.
func groupVersions(key int16) (min, max int16) {
	for _, v := range group.Versions() {
		if v.Key == key {
			return v.Min, v.Max
		}
	}
	// A programming error found by any test run: the file registers a key
	// the coordinator does not serve.
	panic(fmt.Sprintf("kafka: broker/group does not serve API key %d", key))
}

// regGroupKey registers an ordered group API at the coordinator's versions.
func regGroupKey(key int16, h handler) {
	min, max := groupVersions(key)
	regKey(key, min, max, h)
}

// regBlockingGroupKey registers a group API that waits for other members.
func regBlockingGroupKey(key int16, h handler) {
	min, max := groupVersions(key)
	regBlockingKey(key, min, max, h)
}

// withClient attaches the client ID and host (Kafka's "/1.2.3.4" form) the
// coordinator reports in member descriptions.
func withClient(ctx context.Context, r *request) context.Context {
	return group.WithClient(ctx, group.ClientInfo{ID: r.clientIDString(), Host: "/" + r.conn.host})
}
