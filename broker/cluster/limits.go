package cluster

import "fmt"

// partitionLimits are the effective partition limits of a Config, zero
// fields replaced by their defaults.
type partitionLimits struct {
	perTopic, perRequest, total int32
}

func (c Config) partitionLimits() partitionLimits {
	l := partitionLimits{perTopic: c.MaxPartitionsPerTopic, perRequest: c.MaxPartitionsPerRequest, total: c.MaxPartitions}
	if l.perTopic == 0 {
		l.perTopic = DefaultMaxPartitionsPerTopic
	}
	if l.perRequest == 0 {
		l.perRequest = DefaultMaxPartitionsPerRequest
	}
	if l.total == 0 {
		l.total = DefaultMaxPartitions
	}
	return l
}

// MaxPartitionsPerTopic is millrace.max.partitions.per.topic.
func (c *Cluster) MaxPartitionsPerTopic() int32 { return c.cfg.partitionLimits().perTopic }

// MaxPartitionsPerRequest is millrace.max.partitions.per.request: the most
// partitions one CreateTopics or CreatePartitions request may add over all
// its topics. The wire handlers apply it, since only they see the request.
func (c *Cluster) MaxPartitionsPerRequest() int32 { return c.cfg.partitionLimits().perRequest }

// checkPartitionLimitsLocked checks, before anything is sized from it, that
// a topic may have count partitions of which added are new: at most
// millrace.max.partitions.per.topic, and the cluster at most
// millrace.max.partitions afterwards. The caller holds adminMu, so the
// total cannot change before the store write.
func (c *Cluster) checkPartitionLimitsLocked(topic string, count, added int64) error {
	limits := c.cfg.partitionLimits()
	if count > int64(limits.perTopic) {
		return fmt.Errorf("%w: topic %q would have %d partitions, more than millrace.max.partitions.per.topic (%d)", ErrInvalidPartitions, topic, count, limits.perTopic)
	}
	c.mu.RLock()
	total := int64(0)
	for _, e := range c.topics {
		total += int64(len(e.topic.Partitions))
	}
	c.mu.RUnlock()
	if total+added > int64(limits.total) {
		return fmt.Errorf("%w: adding %d partitions for topic %q would bring the cluster to %d, more than millrace.max.partitions (%d)", ErrPolicyViolation, added, topic, total+added, limits.total)
	}
	return nil
}
