// Package quota holds Kafka's client quotas: the quota types, the entities
// they are set for (user, client ID, both, and their defaults) and the
// limiter the broker asks, per request, how long a client must be
// throttled. Enforcement (answering with throttle_time_ms and muting the
// connection, KIP-219) lives in broker/kafka; this package decides.
package quota

import "time"

// Kind is a quota type, named as Kafka names its configuration keys.
type Kind string

// The quota types Kafka has.
const (
	// ProducerByteRate bounds the bytes a client produces per second.
	ProducerByteRate Kind = "producer_byte_rate"
	// ConsumerByteRate bounds the bytes a client fetches per second.
	ConsumerByteRate Kind = "consumer_byte_rate"
	// RequestPercentage bounds the share of a request handler thread's
	// time a client's requests take, in percent per second.
	RequestPercentage Kind = "request_percentage"
	// ControllerMutationRate bounds the partitions a client creates or
	// deletes per second (KIP-599).
	ControllerMutationRate Kind = "controller_mutation_rate"
)

// Limiter is what the broker's request path asks. A broker with no quota
// configured anywhere must answer 0 at the cost of a few loads.
type Limiter interface {
	// Record counts value (bytes, or request handling time in
	// nanoseconds for RequestPercentage) against the quota of kind that
	// applies to (user, clientID), and returns how long the client must
	// be throttled for it: 0 when within its quota or none applies.
	Record(kind Kind, user, clientID string, value float64, now time.Time) time.Duration
	// TryMutate asks for n partition mutations (created or deleted) of
	// (user, clientID) under ControllerMutationRate: ok is false, with
	// the throttle time, when the client is over its rate and the
	// request must be answered THROTTLING_QUOTA_EXCEEDED.
	TryMutate(user, clientID string, n int, now time.Time) (throttle time.Duration, ok bool)
}

// Switch is implemented by a Limiter whose quotas come and go at run
// time (Manager): Enabled(kind) is false while no entity anywhere has a
// quota of kind, at the cost of one atomic load, so the request path can
// skip measuring (a request's handling time, its bytes) for a kind no
// one limits instead of measuring and then being told 0.
type Switch interface {
	Enabled(kind Kind) bool
}

// None is the Limiter with no quotas: it never throttles.
type None struct{}

// Record implements Limiter.
func (None) Record(Kind, string, string, float64, time.Time) time.Duration { return 0 }

// TryMutate implements Limiter.
func (None) TryMutate(string, string, int, time.Time) (time.Duration, bool) { return 0, true }
