package cluster

import (
	"context"
	"errors"
	"testing"
	"time"
)

// setLeaderForTest replaces partition p's leader in the model, as a refresh
// that read a new partition state would.
func (e *env) setLeaderForTest(name string, p int32, leader int32) {
	e.t.Helper()
	c := e.c
	c.mu.Lock()
	defer c.mu.Unlock()
	entry := c.topics[name]
	t := *entry.topic
	t.Partitions = append([]*PartitionState(nil), t.Partitions...)
	state := t.Partitions[p].clone()
	state.Leader = leader
	t.Partitions[p] = state
	next := &topicEntry{topic: &t, logs: entry.logs}
	c.topics[name], c.byID[t.ID] = next, next
	c.signalModelLocked()
}

// TestAwaitTopicReady: a created topic is ready at once; one with a
// partition without a leader is not (the wait ends with its context), and
// a waiter wakes as soon as the model gives the partition a leader.
func TestAwaitTopicReady(t *testing.T) {
	e := openEnv(t, t.TempDir())
	if err := e.c.Register("h0", 9092, ""); err != nil {
		t.Fatal(err)
	}
	topic, err := e.c.CreateTopic(TopicSpec{Name: "ready", Partitions: 2, ReplicationFactor: 1}, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.c.AwaitTopicReady(context.Background(), "ready", topic.ID); err != nil {
		t.Fatalf("a created topic: %v", err)
	}

	e.setLeaderForTest("ready", 1, -1)
	short, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := e.c.AwaitTopicReady(short, "ready", topic.ID); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a partition without a leader: %v, want the context's deadline", err)
	}

	done := make(chan error, 1)
	c := e.c // e.close sets e.c to nil
	go func() { done <- c.AwaitTopicReady(context.Background(), "ready", topic.ID) }()
	e.setLeaderForTest("ready", 1, 0)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("after the leader came: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter did not wake when the partition got a leader")
	}

	// More partitions than the topic has: not ready until they exist.
	short3, cancel3 := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel3()
	if err := e.c.AwaitPartitionsReady(short3, "ready", topic.ID, 3); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiting for a third partition: %v, want the context's deadline", err)
	}
	if _, err := e.c.CreatePartitions("ready", 3, nil, false); err != nil {
		t.Fatal(err)
	}
	if err := e.c.AwaitPartitionsReady(context.Background(), "ready", topic.ID, 3); err != nil {
		t.Fatalf("after CreatePartitions: %v", err)
	}

	// A leader that is not a live broker is no leader for Metadata.
	e.setLeaderForTest("ready", 0, 7)
	short2, cancel2 := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel2()
	if err := e.c.AwaitTopicReady(short2, "ready", topic.ID); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a leader that is not live: %v, want the context's deadline", err)
	}

	// Re-created under another ID: the wait for the old one fails.
	if err := e.c.DeleteTopic("ready"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.CreateTopic(TopicSpec{Name: "ready", Partitions: 1, ReplicationFactor: 1}, false); err != nil {
		t.Fatal(err)
	}
	if err := e.c.AwaitTopicReady(context.Background(), "ready", topic.ID); !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("re-created topic: %v, want ErrUnknownTopic", err)
	}
}

// TestAwaitTopicGone: a deletion ends the wait; a topic still listed keeps
// it going until its context ends; Close wakes every waiter.
func TestAwaitTopicGone(t *testing.T) {
	e := openEnv(t, t.TempDir())
	if err := e.c.Register("h0", 9092, ""); err != nil {
		t.Fatal(err)
	}
	var ids [2][16]byte
	for i, name := range []string{"gone", "stays"} {
		topic, err := e.c.CreateTopic(TopicSpec{Name: name, Partitions: 1, ReplicationFactor: 1}, false)
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = topic.ID
	}
	short, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := e.c.AwaitTopicGone(short, "gone", ids[0]); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a listed topic: %v, want the context's deadline", err)
	}
	if err := e.c.DeleteTopic("gone"); err != nil {
		t.Fatal(err)
	}
	if err := e.c.AwaitTopicGone(context.Background(), "gone", ids[0]); err != nil {
		t.Fatalf("a deleted topic: %v", err)
	}

	done := make(chan error, 1)
	c := e.c // e.close sets e.c to nil
	go func() { done <- c.AwaitTopicGone(context.Background(), "stays", ids[1]) }()
	e.close()
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("waiter at Close: %v, want ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not wake the waiter")
	}
}
