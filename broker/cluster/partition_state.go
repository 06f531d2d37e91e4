package cluster

import (
	"errors"
	"fmt"

	"millrace/broker/coord"
)

// ReadPartitionState reads a partition's state straight from the store (not
// from the model), with its znode version in StateVersion. A leader calls it
// after an ISR compare-and-set failed, to learn what won.
func (c *Cluster) ReadPartitionState(topic string, partition int32) (*PartitionState, error) {
	data, stat, err := c.store.Get(partitionStatePath(topic, partition))
	if err != nil {
		return nil, fmt.Errorf("cluster: reading the state of %s/%d: %w", topic, partition, err)
	}
	p := &PartitionState{Topic: topic, Partition: partition}
	if err := decodePartitionState(p, data); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	p.StateVersion = stat.Version
	return p, nil
}

// ErrStateChanged is returned by WritePartitionState when the state's
// version no longer matches: someone else (the controller, another leader)
// wrote it first.
var ErrStateChanged = errors.New("cluster: partition state changed concurrently")

// WritePartitionState writes a partition's leader, leader epoch, ISR and
// controller epoch with compare-and-set on expectedVersion, returning the
// new version. The leader uses it for ISR changes (docs/architecture.md §5). Errors wrap
// ErrStateChanged on a version mismatch; any other error leaves the outcome
// unknown, so the caller re-reads.
func (c *Cluster) WritePartitionState(p *PartitionState, expectedVersion int32) (int32, error) {
	stat, err := c.store.Set(partitionStatePath(p.Topic, p.Partition), encodePartitionState(p), expectedVersion)
	if errors.Is(err, coord.ErrBadVersion) {
		return 0, fmt.Errorf("%w: %s/%d at version %d", ErrStateChanged, p.Topic, p.Partition, expectedVersion)
	}
	if err != nil {
		return 0, fmt.Errorf("cluster: writing the state of %s/%d: %w", p.Topic, p.Partition, err)
	}
	return stat.Version, nil
}
