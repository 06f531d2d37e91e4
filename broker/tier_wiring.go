package broker

// Tiered storage (broker/tier) wired to this broker: the tier imports
// nothing above the log, so the broker tells it which partitions it hosts,
// which it leads at which epoch, their high watermarks, the topics' IDs
// and whether it is the controller.

import (
	"context"
	"errors"
	"fmt"

	"millrace/broker/cluster"
	"millrace/broker/log"
	"millrace/broker/replication"
	"millrace/broker/tier"
)

// tierReads is the read side with the index the tier keeps current.
type tierReads struct {
	*tier.ReadSide
	Index *tier.Index
}

// openTierReads opens the remote object store and the read side over it,
// which the wire server takes (Deps.RemoteIndex, Deps.RemoteReads): a
// Fetch below the local log start of a tiered partition, and ListOffsets'
// earliest, are answered from the index that openTier's manager keeps.
func (b *Broker) openTierReads() error {
	var err error
	if b.tierStore, err = b.cfg.Tier.OpenStore(context.Background(), b.logger); err != nil {
		return err
	}
	index := tier.NewIndex()
	side, err := tier.OpenReadSide(b.tierStore, index, b.cfg.Tier.Read, b.cfg.Metrics)
	if err != nil {
		return err
	}
	b.tierReads = &tierReads{ReadSide: side, Index: index}
	return nil
}

// openTier starts the tier's rounds over the store openTierReads opened,
// keeping its index current.
func (b *Broker) openTier() (*tier.Manager, error) {
	cl, replicas, brokerID := b.cluster, b.server.Replicas(), b.cfg.Kafka.BrokerID
	replicated := b.cfg.ZooKeeper != ""
	host := tier.Host{
		Partitions: func() []tier.Partition {
			var out []tier.Partition
			for _, t := range cl.Topics() {
				for _, ps := range t.Partitions {
					hw, known := replicas.CleanerBound(log.TopicPartition{Topic: t.Name, Partition: ps.Partition})
					if !known {
						continue // no replica state yet: nothing is known committed
					}
					if p, ok := tierPartition(cl, brokerID, t.Name, ps.Partition, hw); ok {
						out = append(out, p)
					}
				}
			}
			return out
		},
		TopicIDs: func() map[string][16]byte {
			ids := map[string][16]byte{}
			for _, t := range cl.Topics() {
				ids[t.Name] = t.ID
			}
			return ids
		},
		Controller: func() bool { return !replicated || cl.ControllerID() == brokerID },
		Index:      b.tierReads.Index,
	}
	m, err := tier.New(b.cfg.Tier, b.tierStore, b.store, host, b.cfg.Metrics, b.logger)
	if err != nil {
		return nil, err
	}
	b.tier = m
	b.tierReady.Store(m)
	m.Start()
	return m, nil
}

// errTierStarting: a replica fetcher reached a tiered partition's remote
// records before the tier was open; its next try finds it.
var errTierStarting = errors.New("tiered storage is still starting")

// rebuildReplica is the replica fetchers' RemoteRebuild: the tier
// restarts the followed log at the leader's local log start. The fetchers
// start with the cluster, before the tier opens, hence tierReady.
func (b *Broker) rebuildReplica(ctx context.Context, f *replication.Followed, leaderLocalStart int64) error {
	m := b.tierReady.Load()
	if m == nil {
		return errTierStarting
	}
	t, ok := b.cluster.Topic(f.Topic)
	if !ok {
		return fmt.Errorf("topic %s is gone", f.Topic)
	}
	p := tier.Partition{Topic: f.Topic, TopicID: t.ID, Partition: f.Partition, Log: f.Log, LeaderEpoch: f.Epoch}
	return m.RebuildReplica(ctx, p, leaderLocalStart)
}

// tierPartition is a partition this broker hosts on a tiered topic, as
// the tier sees it, with high watermark hw (-1: every record committed).
func tierPartition(cl *cluster.Cluster, brokerID int32, topic string, partition int32, hw int64) (tier.Partition, bool) {
	state, l, ok := cl.Partition(topic, partition)
	if !ok || l == nil || !l.Config().RemoteStorageEnable {
		return tier.Partition{}, false
	}
	t, ok := cl.Topic(topic)
	if !ok {
		return tier.Partition{}, false
	}
	return tier.Partition{Topic: topic, TopicID: t.ID, Partition: partition, Log: l,
		Leader: state.Leader == brokerID, LeaderEpoch: state.LeaderEpoch, HighWatermark: hw}, true
}
