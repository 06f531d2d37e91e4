package kafka

// controller_mutation_rate (KIP-599): CreateTopics, CreatePartitions and
// DeleteTopics ask the quota before each topic's change, with the
// partitions it creates or deletes.
//
// Versions that know THROTTLING_QUOTA_EXCEEDED (CreateTopics v6+,
// CreatePartitions v3+, DeleteTopics v5+) get Kafka's strict quota: once the
// client is over its rate, the request's remaining topics are answered
// THROTTLING_QUOTA_EXCEEDED and nothing of theirs is changed; the client
// retries them after throttle_time_ms. Older versions cannot be told, so
// they get the permissive quota: every change goes ahead, is recorded, and
// the response is throttled (throttle_time_ms and the connection muted,
// throttle.go). validate_only changes nothing and is not counted.

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"millrace/broker/quota"
)

// mutationGate is one request's controller mutation quota.
type mutationGate struct {
	e        *quotaEnforcer // nil: no quotas, exempt, or validate_only
	user     string
	clientID string
	// strict is set for versions that can be answered
	// THROTTLING_QUOTA_EXCEEDED.
	strict bool
	// throttle is the longest throttle the quota asked for.
	throttle time.Duration
}

// mutations returns r's mutation gate; strictFrom is the first version of
// r's API that knows THROTTLING_QUOTA_EXCEEDED.
func (b *Broker) mutations(r *request, strictFrom int16, validateOnly bool) mutationGate {
	if b.quotas == nil || validateOnly || b.quotas.exempt(r) {
		return mutationGate{}
	}
	return mutationGate{
		e:        b.quotas,
		user:     quotaUser(r.conn.principal),
		clientID: r.clientIDString(),
		strict:   r.version >= strictFrom,
	}
}

// admit asks for n partition mutations: false means the topic must be
// answered THROTTLING_QUOTA_EXCEEDED (errorMessage says why) and left
// unchanged.
func (g *mutationGate) admit(n int) bool {
	if g.e == nil || n <= 0 {
		return true
	}
	now := time.Now()
	if !g.strict {
		g.throttle = max(g.throttle, g.e.limiter.Record(quota.ControllerMutationRate, g.user, g.clientID, float64(n), now))
		return true
	}
	throttle, ok := g.e.limiter.TryMutate(g.user, g.clientID, n, now)
	g.throttle = max(g.throttle, throttle)
	return ok
}

// throttleMillis is the response's throttle_time_ms from the quota; the
// connection is muted for it when the response is answered (throttle.go).
func (g *mutationGate) throttleMillis() int32 {
	if g.throttle <= 0 {
		return 0
	}
	return throttleMillis(g.throttle)
}

// quotaExceededCode and quotaExceededMessage answer a topic refused by
// the mutation quota.
var quotaExceededCode = kerr.ThrottlingQuotaExceeded.Code

const quotaExceededMessage = "the client is over its controller_mutation_rate quota: retry after throttle_time_ms"
