package replica

import (
	"fmt"
	"time"
)

// Config holds the replication settings of one partition.
type Config struct {
	// ReplicaLagTimeMax is replica.lag.time.max.ms: a follower that has not
	// caught up with the leader's log end offset for this long is removed
	// from the ISR. Default 30 s.
	ReplicaLagTimeMax time.Duration
	// MinInsyncReplicas is the topic's min.insync.replicas: an acks=all
	// write needs at least this many ISR members. Default 1.
	MinInsyncReplicas int
}

// DefaultConfig returns Kafka's defaults.
func DefaultConfig() Config {
	return Config{ReplicaLagTimeMax: 30 * time.Second, MinInsyncReplicas: 1}
}

// Validate rejects settings that cannot work.
func (c Config) Validate() error {
	if c.ReplicaLagTimeMax <= 0 {
		return fmt.Errorf("replica: replica.lag.time.max.ms must be positive, or every follower would leave the ISR at once (got %v)", c.ReplicaLagTimeMax)
	}
	if c.MinInsyncReplicas < 1 {
		return fmt.Errorf("replica: min.insync.replicas must be at least 1, since the leader itself is always in sync (got %d)", c.MinInsyncReplicas)
	}
	return nil
}
