package kafka

// The transaction coordinator's marker writer (broker/txn's MarkerWriter):
// a decided transaction's markers go as WriteTxnMarkers (key 27) to the
// leader of each of its partitions and, for each consumer group whose
// offsets it commits, to the group's coordinator as a marker for
// "__consumer_offsets" partition group.Partition(group), as Kafka sends
// them. Every other broker gets one request holding its share, over the
// inter-broker clients; this broker's share is written directly.
//
// A partition answered with an error is written again on the next
// attempt, unless the partition no longer exists (its topic was deleted:
// there is nothing left to mark, as Kafka drops such markers). A partition
// whose producer has moved past the marker's epoch, or a coordinator epoch
// newer than the marker's, has been ended by a later coordinator decision:
// it counts as written.

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/group"
	"millrace/broker/txn"
)

// consumerOffsetsTopic is the topic name group markers carry.
const consumerOffsetsTopic = "__consumer_offsets"

// txnMarkerWriter writes transaction markers for the coordinator.
type txnMarkerWriter struct{ b *Broker }

// markerTargets maps a broker ID to the partitions, by topic, it is sent
// markers for.
type markerTargets map[int32]map[string][]int32

func (t markerTargets) add(broker int32, topic string, partition int32) {
	if t[broker] == nil {
		t[broker] = map[string][]int32{}
	}
	t[broker][topic] = append(t[broker][topic], partition)
}

// WriteMarkers implements txn.MarkerWriter.
func (w txnMarkerWriter) WriteMarkers(ctx context.Context, m txn.Markers) error {
	b := w.b
	targets := markerTargets{}
	var errs []error
	for topic, partitions := range m.Partitions {
		for _, p := range partitions {
			state, _, ok := b.cluster.Partition(topic, p)
			switch {
			case !ok:
				// Deleted since the transaction wrote to it.
			case state.Leader < 0:
				errs = append(errs, fmt.Errorf("%s-%d has no leader", topic, p))
			default:
				targets.add(state.Leader, topic, p)
			}
		}
	}
	for _, g := range m.Groups {
		c, _, ok := b.cluster.GroupCoordinator(g)
		if !ok {
			errs = append(errs, fmt.Errorf("group %q has no coordinator", g))
			continue
		}
		targets.add(c.ID, consumerOffsetsTopic, group.Partition(g))
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for broker, topics := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := w.send(ctx, broker, m, topics); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// send writes m's markers for topics on broker and checks every partition's
// answer.
func (w txnMarkerWriter) send(ctx context.Context, broker int32, m txn.Markers, topics map[string][]int32) error {
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.Version = 1
	marker := kmsg.NewWriteTxnMarkersRequestMarker()
	marker.ProducerID, marker.ProducerEpoch = m.ProducerID, m.ProducerEpoch
	marker.Committed = m.Commit
	marker.CoordinatorEpoch = m.CoordinatorEpoch
	for topic, partitions := range topics {
		rt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
		rt.Topic, rt.Partitions = topic, partitions
		marker.Topics = append(marker.Topics, rt)
	}
	req.Markers = []kmsg.WriteTxnMarkersRequestMarker{marker}
	var resp *kmsg.WriteTxnMarkersResponse
	if broker == w.b.cfg.BrokerID {
		// This broker's share needs no socket (27_write_txn_markers.go).
		resp = w.b.writeTxnMarkers(ctx, req)
	} else {
		raw, err := w.b.brokers.Request(ctx, broker, req)
		if err != nil {
			return err
		}
		resp = raw.(*kmsg.WriteTxnMarkersResponse)
	}
	var errs []error
	answered := 0
	for _, rm := range resp.Markers {
		if rm.ProducerID != m.ProducerID {
			continue
		}
		for _, rt := range rm.Topics {
			for _, rp := range rt.Partitions {
				answered++
				if err := w.partitionDone(rt.Topic, rp.Partition, rp.ErrorCode); err != nil {
					errs = append(errs, fmt.Errorf("broker %d: %s-%d: %w", broker, rt.Topic, rp.Partition, err))
				}
			}
		}
	}
	want := 0
	for _, ps := range topics {
		want += len(ps)
	}
	if answered < want {
		errs = append(errs, fmt.Errorf("broker %d answered %d of %d partitions", broker, answered, want))
	}
	return errors.Join(errs...)
}

// partitionDone judges one partition's answer: nil when its marker is
// written or no longer needed.
func (w txnMarkerWriter) partitionDone(topic string, partition int32, code int16) error {
	switch code {
	case 0:
		return nil
	case kerr.InvalidProducerEpoch.Code, kerr.ProducerFenced.Code, kerr.TransactionCoordinatorFenced.Code:
		// A later decision for this producer has reached the partition.
		w.b.logger.Warn("a partition refused a transaction marker as stale", "topic", topic, "partition", partition, "err", kerr.ErrorForCode(code))
		return nil
	case kerr.UnknownTopicOrPartition.Code:
		if topic != consumerOffsetsTopic {
			if _, _, ok := w.b.cluster.Partition(topic, partition); !ok {
				return nil
			}
		}
	}
	return kerr.ErrorForCode(code)
}
