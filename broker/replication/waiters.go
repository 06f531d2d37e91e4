package replication

// Append notification for long-poll Fetch (Kafka's delayed-fetch
// purgatory). A waiting Fetch registers one waiter on every partition it
// reads; whatever makes new data visible on a partition (an append as
// leader, a transaction marker, the high watermark moving on a leader or a
// follower, an fsync for millrace.flush.on.ack) wakes each waiter on it.
// No polling: a Fetch with nothing to read sleeps until a wake-up, its max
// wait, or the connection closing.

import (
	"sync"

	"millrace/broker/log"
)

// dataWaiters maps partitions to the Fetch requests waiting on them
// (Manager.waiters).
type dataWaiters struct {
	mu      sync.Mutex // guards the following
	waiting map[log.TopicPartition]map[*Waiter]struct{}
}

// Waiter is one waiting Fetch. Wake has room for one signal, so a
// notification between registering and waiting is not lost, and many
// notifications while busy collapse into one.
type Waiter struct {
	wake       chan struct{}
	partitions []log.TopicPartition
}

// Wake receives a signal when a watched partition has new visible data.
func (w *Waiter) Wake() <-chan struct{} { return w.wake }

func newDataWaiters() *dataWaiters {
	return &dataWaiters{waiting: make(map[log.TopicPartition]map[*Waiter]struct{})}
}

// Watch registers a waiter on partitions. Register before reading, so that
// an append racing with the read still wakes the waiter. The caller must
// call Unwatch.
func (m *Manager) Watch(partitions []log.TopicPartition) *Waiter {
	d := m.waiters
	w := &Waiter{wake: make(chan struct{}, 1), partitions: partitions}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, tp := range partitions {
		set := d.waiting[tp]
		if set == nil {
			set = make(map[*Waiter]struct{})
			d.waiting[tp] = set
		}
		set[w] = struct{}{}
	}
	return w
}

// Unwatch removes a waiter.
func (m *Manager) Unwatch(w *Waiter) {
	d := m.waiters
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, tp := range w.partitions {
		set := d.waiting[tp]
		delete(set, w)
		if len(set) == 0 {
			delete(d.waiting, tp)
		}
	}
}

// NotifyData wakes every Fetch waiting on topic/partition without
// blocking. The partition calls it after an append and whenever its high
// watermark advances; other writers (transaction markers) call it after
// theirs.
func (m *Manager) NotifyData(topic string, partition int32) {
	d := m.waiters
	d.mu.Lock()
	defer d.mu.Unlock()
	for w := range d.waiting[log.TopicPartition{Topic: topic, Partition: partition}] {
		select {
		case w.wake <- struct{}{}:
		default: // already signalled
		}
	}
}
