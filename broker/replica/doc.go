// Package replica holds the decision logic of partition replication: what a
// leader does when followers fetch, when its log grows and when time passes
// (advance the high watermark, shrink or expand the in-sync replica set,
// complete or fail acks=all produce requests), and what a follower does when
// it starts following a new leader (truncate by leader epoch, then fetch).
//
// Everything here is a deterministic state machine or a pure function in the
// manner of etcd raft: events go in, decisions come out, and there is no I/O,
// no clock and no goroutine inside. The caller (the broker's replica manager)
// owns the log, the coordination store and the network; it feeds events in
// order, under its own lock, and carries out the decisions:
//
//   - Leader.FollowerFetch, Leader.Appended, Leader.Tick, Leader.WaitForAcks
//     and the ISR write results return a Decisions value: publish the new high
//     watermark to readers (and the log's checkpoint), write a proposed ISR
//     to the partition state with compare-and-set, and answer the produce
//     requests listed as completed or failed.
//   - TruncationFor decides where a new follower truncates its log before
//     fetching (KIP-101, KIP-279).
//
// The rules are Kafka's: high watermark = min log end offset over the ISR;
// an ISR change is applied only after its compare-and-set succeeded
// (KIP-497's pending ISR); a fenced leader never acknowledges a write.
package replica
