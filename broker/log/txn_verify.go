package log

// The partition's half of KIP-890 part 1's transaction verification. The
// leader asks the transaction coordinator whether a producer's ongoing
// transaction holds the partition before it appends the transaction's
// first batch there; the answer takes a round trip, and in that time the
// transaction may end: the coordinator writes its marker here, and the
// batch, appended after it, would open a transaction no coordinator knows
// of. As in Kafka (VerificationGuard), the log hands out a guard object per
// producer when verification starts; an end transaction marker, or the
// producer's first batch of a transaction, removes it, and a batch that
// needed verification is appended only while its guard is still the
// producer's, or while its transaction is still ongoing here.

import (
	"fmt"
	"time"
)

// verificationGuard is one verification in progress: compared by
// identity, never by value.
type verificationGuard struct {
	epoch   int16
	started int64 // ms, for expiry
}

// TxnVerification is what StartTxnVerification returns, for
// ValidBatches.WithTxnVerification. The zero value asks for no check (the
// broker does not verify transactions).
type TxnVerification struct {
	required bool
	guard    *verificationGuard // nil when the transaction was ongoing here
}

// StartTxnVerification begins the verification of producerID's
// transaction at epoch before its batch is appended. needed is false when
// the transaction is ongoing on this partition already: the coordinator
// need not be asked. Either way the returned TxnVerification goes with the
// batch (ValidBatches.WithTxnVerification), and AppendValidated refuses it
// with ErrInvalidTxnState if the transaction ended in between. The error
// wraps ErrProducerState when the state cannot be loaded.
func (l *Log) StartTxnVerification(producerID int64, epoch int16) (v TxnVerification, needed bool, err error) {
	ps := &l.producers
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if err := l.ensureProducersLoadedLocked(); err != nil {
		return TxnVerification{}, false, err
	}
	if e := ps.producers[producerID]; e != nil && e.txnOngoing && e.epoch == epoch {
		return TxnVerification{required: true}, false, nil
	}
	g := ps.verifying[producerID]
	if g == nil || g.epoch != epoch {
		g = &verificationGuard{epoch: epoch, started: ps.now().UnixMilli()}
		ps.addVerificationLocked(producerID, g)
	}
	return TxnVerification{required: true, guard: g}, true, nil
}

// addVerificationLocked records g as producerID's verification in
// progress, forgetting the oldest one when the partition holds
// millrace.max.producer.ids.per.partition of them already (its batch will
// be refused, and the producer retries).
func (ps *producerState) addVerificationLocked(producerID int64, g *verificationGuard) {
	if ps.verifying == nil {
		ps.verifying = make(map[int64]*verificationGuard)
	}
	if _, ok := ps.verifying[producerID]; !ok && len(ps.verifying) >= ps.cfg.MaxIDsPerPartition {
		oldest, at := int64(-1), int64(0)
		for id, other := range ps.verifying {
			if oldest < 0 || other.started < at {
				oldest, at = id, other.started
			}
		}
		delete(ps.verifying, oldest)
	}
	ps.verifying[producerID] = g
}

// WithTxnVerification returns v carrying the verification of its
// transaction, checked by AppendValidated.
func (v ValidBatches) WithTxnVerification(t TxnVerification) ValidBatches {
	v.txnVerification = t
	return v
}

// checkVerificationLocked refuses a transactional batch that needed
// verification when its transaction is not ongoing here and its guard is
// no longer the producer's: a marker ended the transaction after the
// coordinator verified it.
func (ps *producerState) checkVerificationLocked(h BatchHeader, t TxnVerification) error {
	if !t.required || !h.Transactional() || h.Control() {
		return nil
	}
	if e := ps.producers[h.ProducerID]; e != nil && e.txnOngoing && e.epoch == h.ProducerEpoch {
		return nil
	}
	if t.guard != nil && ps.verifying[h.ProducerID] == t.guard {
		return nil
	}
	return &ProducerError{Err: ErrInvalidTxnState, Message: fmt.Sprintf("producer ID %d epoch %d: the transaction this batch was verified for has ended on the partition", h.ProducerID, h.ProducerEpoch)}
}

// endVerificationsLocked drops the guards of the producers whose
// transaction batches or markers were just appended: a marker ends the
// transaction a guard was for, and after a transaction's first batch its
// later ones pass as ongoing.
func (ps *producerState) endVerificationsLocked(headers []BatchHeader) {
	if len(ps.verifying) == 0 {
		return
	}
	for _, h := range headers {
		if isIdempotent(h) && h.Transactional() {
			delete(ps.verifying, h.ProducerID)
		}
	}
}

// expireVerificationsLocked forgets guards older than before (ms): their
// produce requests have long timed out.
func (ps *producerState) expireVerificationsLocked(before int64) {
	for id, g := range ps.verifying {
		if g.started < before {
			delete(ps.verifying, id)
		}
	}
}

// verificationExpiry bounds how long a guard is kept: far longer than any
// produce request waits for the coordinator's answer.
const verificationExpiry = 10 * time.Minute
