package kafka

// Append notification for long-poll Fetch. A waiting Fetch registers one
// waiter on every partition it reads; whoever makes new data visible on a
// partition (the Produce handler after an append today, the replication
// code when the high watermark moves later) calls notifyData, which wakes
// each waiter on it. No polling: a Fetch with nothing to read sleeps until a
// wake-up, its max wait, or the connection closing.

import (
	"sync"

	"millrace/broker/log"
)

// dataWaiters maps partitions to the Fetch requests waiting on them
// (Broker.waiters).
type dataWaiters struct {
	mu      sync.Mutex // guards the following
	waiting map[log.TopicPartition]map[*dataWaiter]struct{}
}

// dataWaiter is one waiting Fetch. wake has room for one signal, so a
// notification between registering and waiting is not lost, and many
// notifications while busy collapse into one.
type dataWaiter struct {
	wake       chan struct{}
	partitions []log.TopicPartition
}

func newDataWaiters() *dataWaiters {
	return &dataWaiters{waiting: make(map[log.TopicPartition]map[*dataWaiter]struct{})}
}

// watch registers a waiter on partitions. Register before reading, so that
// an append racing with the read still wakes the waiter. The caller must
// call unwatch.
func (d *dataWaiters) watch(partitions []log.TopicPartition) *dataWaiter {
	w := &dataWaiter{wake: make(chan struct{}, 1), partitions: partitions}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, tp := range partitions {
		set := d.waiting[tp]
		if set == nil {
			set = make(map[*dataWaiter]struct{})
			d.waiting[tp] = set
		}
		set[w] = struct{}{}
	}
	return w
}

// unwatch removes a waiter.
func (d *dataWaiters) unwatch(w *dataWaiter) {
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

// notify wakes every waiter on tp without blocking.
func (d *dataWaiters) notify(tp log.TopicPartition) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for w := range d.waiting[tp] {
		select {
		case w.wake <- struct{}{}:
		default: // already signalled
		}
	}
}

// notifyData tells waiting Fetches that topic/partition has new visible
// data. Call it after an append and whenever the high watermark advances.
func (b *Broker) notifyData(topic string, partition int32) {
	b.waiters.notify(log.TopicPartition{Topic: topic, Partition: partition})
}
