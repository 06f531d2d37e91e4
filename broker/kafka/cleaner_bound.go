package kafka

import "millrace/broker/log"

// CleanerBound is the offset the log cleaner must not clean past on tp:
// the partition's high watermark, on its leader and on its followers, so
// no record a new leader could truncate away is used to remove another
// (broker/log/cleaner.go). A single broker has no bound (-1). A
// replicated partition this broker holds no replica state for yet is not
// cleaned (false).
func (b *Broker) CleanerBound(tp log.TopicPartition) (int64, bool) {
	m := b.replication()
	if m == nil {
		return -1, true
	}
	rp := m.partition(tp.Topic, tp.Partition)
	if rp == nil {
		return 0, false
	}
	return rp.highWatermark.Load(), true
}
