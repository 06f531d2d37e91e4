package cluster

// Waiting for the model to show an admin change, so that CreateTopics,
// CreatePartitions and DeleteTopics answer once this broker's metadata reflects them, as Kafka's
// DelayedCreatePartitions (every new partition has a leader in the metadata
// cache) and DelayedDeleteTopics (the topic is gone from it) do.
//
// Waiters do not poll: every change of the topics or the live brokers
// closes the current modelChanged channel and makes a new one (under mu),
// so a waiter checks its condition, and if it does not hold yet, waits on
// the channel it read together with the model.

import (
	"context"
	"fmt"
)

// signalModelLocked wakes everything waiting on the model. Called with mu
// held for writing, after the change.
func (c *Cluster) signalModelLocked() {
	close(c.modelChanged)
	c.modelChanged = make(chan struct{})
}

// AwaitTopicReady waits until the model lists the topic with this ID with
// every partition led by a live broker, the state in which Metadata shows it
// whole. It returns ctx's error when ctx ends first, ErrClosed when the
// cluster closes, and an error wrapping ErrUnknownTopic when the topic was
// deleted (or re-created under another ID) meanwhile.
func (c *Cluster) AwaitTopicReady(ctx context.Context, name string, id [16]byte) error {
	return c.AwaitPartitionsReady(ctx, name, id, 1)
}

// AwaitPartitionsReady is AwaitTopicReady for a topic that must also have at
// least count partitions (CreatePartitions waits for the new ones).
func (c *Cluster) AwaitPartitionsReady(ctx context.Context, name string, id [16]byte, count int32) error {
	return c.awaitModel(ctx, func() (bool, error) {
		e, ok := c.topics[name]
		if !ok {
			if d, deleting := c.deleting[name]; deleting && d.topic != nil && d.topic.ID == id {
				return false, fmt.Errorf("%w: %q is being deleted", ErrUnknownTopic, name)
			}
			// Not in the model yet: a creation served by another broker
			// arrives with the next refresh.
			return false, nil
		}
		if e.topic.ID != id {
			return false, fmt.Errorf("%w: %q was re-created under another ID", ErrUnknownTopic, name)
		}
		return int32(len(e.topic.Partitions)) >= count && topicLedLocked(e.topic, c.brokers), nil
	})
}

// AwaitTopicGone waits until the model no longer lists the topic with this
// ID: Metadata shows neither it nor its partitions. It returns ctx's error
// when ctx ends first and ErrClosed when the cluster closes.
func (c *Cluster) AwaitTopicGone(ctx context.Context, name string, id [16]byte) error {
	return c.awaitModel(ctx, func() (bool, error) {
		e, ok := c.topics[name]
		return !ok || e.topic.ID != id, nil
	})
}

// awaitModel waits until done (called with mu held for reading) reports
// true or an error.
func (c *Cluster) awaitModel(ctx context.Context, done func() (bool, error)) error {
	for {
		c.mu.RLock()
		closed := c.closed
		ok, err := done()
		changed := c.modelChanged
		c.mu.RUnlock()
		switch {
		case err != nil:
			return err
		case ok:
			return nil
		case closed:
			return ErrClosed
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

// topicLedLocked reports whether every partition of t has a live leader.
// A topic without partitions is never ready: Metadata does not list it.
func topicLedLocked(t *Topic, brokers []BrokerInfo) bool {
	if len(t.Partitions) == 0 {
		return false
	}
	for _, p := range t.Partitions {
		if p == nil || p.Leader < 0 || !brokerLive(brokers, p.Leader) {
			return false
		}
	}
	return true
}
