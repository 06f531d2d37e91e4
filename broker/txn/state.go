// Package txn is millrace's transaction coordinator (KIP-98): it gives
// transactional producers their producer ID and epoch, records which
// partitions and consumer groups each transaction touches, and ends a
// transaction by writing commit or abort markers to them. It knows nothing
// of the wire: broker/kafka's handlers call it, and it writes markers
// through a MarkerWriter.
//
// The state of a transactional ID lives in the coordination store
// (store.go), not in memory, so whichever broker coordinates the ID next
// (after a failover or a restart) carries on from it: it completes a
// decided transaction whose markers were not all written and aborts one
// past its timeout.
//
// A transaction moves through Kafka's states:
//
//	Empty ──AddPartitions/AddOffsets──▶ Ongoing ──EndTxn──▶ PrepareCommit ──markers──▶ CompleteCommit
//	                                       │                                            │
//	                                       └─EndTxn(abort), timeout, new producer──▶ PrepareAbort ──markers──▶ CompleteAbort
//
// CompleteCommit, CompleteAbort and Empty start the next transaction on its
// first AddPartitions; Dead is an expired ID about to be removed. The
// transitions are pure functions of the stored metadata (this file), so
// every rule is tested without a store.
package txn

import (
	"math"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

// State is a transaction's state, spelled as Kafka's DescribeTransactions
// and ListTransactions spell it.
type State string

// The states of a transaction.
const (
	Empty          State = "Empty"
	Ongoing        State = "Ongoing"
	PrepareCommit  State = "PrepareCommit"
	PrepareAbort   State = "PrepareAbort"
	CompleteCommit State = "CompleteCommit"
	CompleteAbort  State = "CompleteAbort"
	Dead           State = "Dead"
)

// prepared reports whether the transaction's outcome is decided and its
// markers are being written.
func (s State) prepared() bool { return s == PrepareCommit || s == PrepareAbort }

// idle reports whether no transaction is in progress.
func (s State) idle() bool { return s == Empty || s == CompleteCommit || s == CompleteAbort }

// metadataVersion is the format version of the stored JSON.
const metadataVersion = 1

// noProducerID and noEpoch are Kafka's "none" values.
const (
	noProducerID int64 = -1
	noEpoch      int16 = -1
)

// Metadata is the state of one transactional ID, stored as JSON at
// /transactions/<escaped id>:
//
//	{"version":1,"transactional_id":"t","producer_id":7,"producer_epoch":3,
//	 "last_producer_id":7,"last_producer_epoch":2,"timeout_ms":60000,
//	 "state":"Ongoing","partitions":{"topic":[0,1]},"groups":["g"],
//	 "start_ms":1700000000000,"update_ms":1700000000000,"principal":"User:alice"}
//
// last_producer_id and last_producer_epoch are the producer ID and epoch
// before the last InitProducerId bump (-1 when none), so a producer retrying
// an InitProducerId whose answer it lost gets the same answer (KIP-360).
// start_ms is when the current transaction began (its first partition),
// update_ms the last change.
type Metadata struct {
	Version           int                `json:"version"`
	TransactionalID   string             `json:"transactional_id"`
	ProducerID        int64              `json:"producer_id"`
	ProducerEpoch     int16              `json:"producer_epoch"`
	LastProducerID    int64              `json:"last_producer_id"`
	LastProducerEpoch int16              `json:"last_producer_epoch"`
	TimeoutMs         int32              `json:"timeout_ms"`
	State             State              `json:"state"`
	Partitions        map[string][]int32 `json:"partitions"`
	Groups            []string           `json:"groups"`
	StartMs           int64              `json:"start_ms"`
	UpdateMs          int64              `json:"update_ms"`
	// Principal created the ID (its first InitProducerId); IDs are counted
	// against millrace.max.transactional.ids.per.principal by it. Empty in
	// state written before it was kept.
	Principal string `json:"principal,omitempty"`
}

// clone copies m deeply, so a transition never changes its input.
func (m Metadata) clone() Metadata {
	out := m
	out.Partitions = make(map[string][]int32, len(m.Partitions))
	for t, ps := range m.Partitions {
		out.Partitions[t] = slices.Clone(ps)
	}
	out.Groups = slices.Clone(m.Groups)
	return out
}

// ProducerIDAndEpoch is a producer's identity as a request names it.
type ProducerIDAndEpoch struct {
	ID    int64
	Epoch int16
}

// initProducer is InitProducerId on existing metadata m (Kafka's
// prepareInitProducerIdTransit). expected is the producer ID and epoch a
// v3+ request names (ID -1: none). newID allocates a producer ID, called
// only when the epoch is exhausted. It returns the next metadata and
// whether it must be written; code is the answer's error. abort is set
// when an ongoing transaction must be aborted first (the answer is then
// CONCURRENT_TRANSACTIONS and the client retries once the abort completes).
func initProducer(m Metadata, expected ProducerIDAndEpoch, timeoutMs int32, nowMs int64, newID func() (int64, error)) (next Metadata, write, abort bool, code int16, err error) {
	if expected.ID != noProducerID {
		current := expected.ID == m.ProducerID && expected.Epoch == m.ProducerEpoch
		retry := expected.ID == m.LastProducerID && expected.Epoch == m.LastProducerEpoch
		if !current && !retry {
			return m, false, false, kerr.ProducerFenced.Code, nil
		}
		if retry && m.State.idle() {
			// The answer to the bump was lost: give it again.
			return m, false, false, 0, nil
		}
	}
	switch {
	case m.State.prepared():
		return m, false, false, kerr.ConcurrentTransactions.Code, nil
	case m.State == Ongoing:
		// A new producer instance fences the old one: its transaction is
		// aborted under a bumped epoch, so the old producer's late writes
		// and EndTxn are refused (KIP-360's epoch fence).
		next = prepareEnd(m, false, true, nowMs)
		return next, true, true, kerr.ConcurrentTransactions.Code, nil
	case m.State == Dead:
		return m, false, false, kerr.ConcurrentTransactions.Code, nil
	}
	next = m.clone()
	next.LastProducerID, next.LastProducerEpoch = m.ProducerID, m.ProducerEpoch
	if m.ProducerEpoch >= math.MaxInt16-1 {
		// The epoch is exhausted: a new producer ID starts at epoch 0.
		id, err := newID()
		if err != nil {
			return m, false, false, 0, err
		}
		next.ProducerID, next.ProducerEpoch = id, 0
	} else {
		next.ProducerEpoch = m.ProducerEpoch + 1
	}
	next.TimeoutMs = timeoutMs
	next.State = Empty
	next.Partitions = map[string][]int32{}
	next.Groups = nil
	next.StartMs = -1
	next.UpdateMs = nowMs
	return next, true, false, 0, nil
}

// newMetadata is the state of a transactional ID principal uses for the
// first time.
func newMetadata(id, principal string, producerID int64, timeoutMs int32, nowMs int64) Metadata {
	return Metadata{
		Version: metadataVersion, TransactionalID: id, Principal: principal,
		ProducerID: producerID, ProducerEpoch: 0,
		LastProducerID: noProducerID, LastProducerEpoch: noEpoch,
		TimeoutMs: timeoutMs, State: Empty, Partitions: map[string][]int32{},
		StartMs: -1, UpdateMs: nowMs,
	}
}

// checkProducer is the producer check of AddPartitionsToTxn,
// AddOffsetsToTxn and EndTxn.
func checkProducer(m Metadata, p ProducerIDAndEpoch) int16 {
	switch {
	case m.ProducerID != p.ID:
		return kerr.InvalidProducerIDMapping.Code
	case m.ProducerEpoch != p.Epoch:
		return kerr.ProducerFenced.Code
	}
	return 0
}

// addToTransaction adds partitions and groups to the producer's
// transaction, starting it when none is in progress.
func addToTransaction(m Metadata, p ProducerIDAndEpoch, partitions map[string][]int32, groups []string, nowMs int64) (next Metadata, write bool, code int16) {
	if code := checkProducer(m, p); code != 0 {
		return m, false, code
	}
	switch {
	case m.State.prepared():
		return m, false, kerr.ConcurrentTransactions.Code
	case m.State == Dead:
		return m, false, kerr.InvalidProducerIDMapping.Code
	}
	if m.State == Ongoing && contains(m, partitions, groups) {
		return m, false, 0
	}
	next = m.clone()
	if m.State != Ongoing {
		next.State = Ongoing
		next.Partitions = map[string][]int32{}
		next.Groups = nil
		next.StartMs = nowMs
	}
	for t, ps := range partitions {
		for _, pt := range ps {
			if !slices.Contains(next.Partitions[t], pt) {
				next.Partitions[t] = append(next.Partitions[t], pt)
			}
		}
	}
	for _, g := range groups {
		if !slices.Contains(next.Groups, g) {
			next.Groups = append(next.Groups, g)
		}
	}
	next.UpdateMs = nowMs
	return next, true, 0
}

// contains reports whether m's transaction holds every partition and group.
func contains(m Metadata, partitions map[string][]int32, groups []string) bool {
	for t, ps := range partitions {
		for _, p := range ps {
			if !slices.Contains(m.Partitions[t], p) {
				return false
			}
		}
	}
	for _, g := range groups {
		if !slices.Contains(m.Groups, g) {
			return false
		}
	}
	return true
}

// endTransaction is EndTxn: an ongoing transaction is prepared; a retried
// EndTxn whose decision stands gets its answer again.
func endTransaction(m Metadata, p ProducerIDAndEpoch, commit bool, nowMs int64) (next Metadata, write bool, code int16) {
	if code := checkProducer(m, p); code != 0 {
		return m, false, code
	}
	want := map[bool]State{true: PrepareCommit, false: PrepareAbort}[commit]
	done := map[bool]State{true: CompleteCommit, false: CompleteAbort}[commit]
	switch m.State {
	case Ongoing:
		return prepareEnd(m, commit, false, nowMs), true, 0
	case want:
		return m, false, kerr.ConcurrentTransactions.Code
	case done:
		return m, false, 0
	}
	return m, false, kerr.InvalidTxnState.Code
}

// prepareEnd decides m's ongoing transaction; fence bumps the epoch first,
// so the producer that ran it can no longer write (a timed-out or replaced
// producer), unless the epoch is exhausted.
func prepareEnd(m Metadata, commit, fence bool, nowMs int64) Metadata {
	next := m.clone()
	if fence && m.ProducerEpoch < math.MaxInt16-1 {
		next.ProducerEpoch = m.ProducerEpoch + 1
	}
	next.State = PrepareAbort
	if commit {
		next.State = PrepareCommit
	}
	next.UpdateMs = nowMs
	return next
}

// complete records that every marker of m's decided transaction is written.
func complete(m Metadata, nowMs int64) Metadata {
	next := m.clone()
	next.State = CompleteAbort
	if m.State == PrepareCommit {
		next.State = CompleteCommit
	}
	next.UpdateMs = nowMs
	return next
}

// timedOut reports whether m's ongoing transaction is past its timeout.
func timedOut(m Metadata, nowMs int64) bool {
	return m.State == Ongoing && m.StartMs >= 0 && nowMs > m.StartMs+int64(m.TimeoutMs)
}

// expired reports whether m's ID, idle, is past its expiration.
func expired(m Metadata, nowMs int64, expirationMs int64) bool {
	return m.State.idle() && nowMs > m.UpdateMs+expirationMs
}
