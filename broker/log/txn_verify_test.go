package log

import (
	"errors"
	"testing"
	"time"
)

// appendVerified appends a transactional batch carrying t.
func appendVerified(t *testing.T, l *Log, batch []byte, tv TxnVerification) error {
	t.Helper()
	v, err := l.ValidateProduce(batch, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.AppendValidated(v.WithTxnVerification(tv), 0)
	return err
}

// startVerification calls StartTxnVerification and checks whether the
// coordinator must be asked.
func startVerification(t *testing.T, l *Log, producer int64, wantNeeded bool) TxnVerification {
	t.Helper()
	tv, needed, err := l.StartTxnVerification(producer, 0)
	if err != nil || needed != wantNeeded {
		t.Fatalf("StartTxnVerification(%d): needed %v, %v; want needed %v", producer, needed, err, wantNeeded)
	}
	return tv
}

// TestTxnVerificationGuard (KIP-890): a batch verified for a transaction
// that a marker ended before the batch was appended is refused with
// ErrInvalidTxnState, whether the verification asked the coordinator (the
// transaction's first batch here) or found the transaction ongoing; a
// verified batch with no marker in between is appended, and a batch
// without verification (the broker does not verify) is not checked.
func TestTxnVerificationGuard(t *testing.T) {
	l := openTest(t, t.TempDir(), DefaultConfig(), options{})
	defer l.Close()
	refused := func(err error) bool {
		var pe *ProducerError
		return errors.As(err, &pe) && errors.Is(err, ErrInvalidTxnState)
	}

	// The first batch: verified, no marker in between.
	tv := startVerification(t, l, 1, true)
	if err := appendVerified(t, l, txnBatch(1, 0, 0, 1), tv); err != nil {
		t.Fatalf("verified first batch: %v", err)
	}
	// Ongoing: nothing to ask; the next batch goes in.
	if err := appendVerified(t, l, txnBatch(1, 0, 1, 1), startVerification(t, l, 1, false)); err != nil {
		t.Fatalf("batch of the ongoing transaction: %v", err)
	}

	// Verified as ongoing, then the marker: refused.
	late := startVerification(t, l, 1, false)
	endTxn(t, l, 1, true)
	end := l.EndOffset()
	if err := appendVerified(t, l, txnBatch(1, 0, 2, 1), late); !refused(err) {
		t.Fatalf("batch verified as ongoing, after the marker: %v, want ErrInvalidTxnState", err)
	}

	// The next transaction's first batch: verification starts, the
	// coordinator ends the transaction (marker) before the batch lands.
	raced := startVerification(t, l, 1, true)
	endTxn(t, l, 1, false)
	if err := appendVerified(t, l, txnBatch(1, 0, 2, 1), raced); !refused(err) {
		t.Fatalf("first batch verified before a marker: %v, want ErrInvalidTxnState", err)
	}
	if got := l.EndOffset(); got != end+1 {
		t.Fatalf("log end %d, want %d: only the abort marker after the commit", got, end+1)
	}
	if got := firstUnstable(t, l); got != -1 {
		t.Fatalf("a refused batch opened a transaction at %d", got)
	}

	// A fresh verification after the marker passes.
	if err := appendVerified(t, l, txnBatch(1, 0, 2, 1), startVerification(t, l, 1, true)); err != nil {
		t.Fatalf("batch verified after the marker: %v", err)
	}
	// Another producer's marker leaves this producer's guard alone.
	endTxn(t, l, 1, true)
	mine := startVerification(t, l, 1, true)
	if _, err := appendProduced(t, l, txnBatch(2, 0, 0, 1)); err != nil {
		t.Fatal(err)
	}
	endTxn(t, l, 2, true)
	if err := appendVerified(t, l, txnBatch(1, 0, 3, 1), mine); err != nil {
		t.Fatalf("guard dropped by another producer's marker: %v", err)
	}
	// Without verification nothing is checked.
	endTxn(t, l, 1, true)
	if err := appendVerified(t, l, txnBatch(1, 0, 4, 1), TxnVerification{}); err != nil {
		t.Fatalf("unverified batch with verification off: %v", err)
	}
}
