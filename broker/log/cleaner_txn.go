package log

// Transactions in a compacted log, as Kafka's cleaner treats them. Every
// transaction the cleaner meets has ended: a pass never reaches the first
// unstable offset (cleaner.go). Whether one committed is read from the
// aborted transactions of the .txnindex (txn_index.go):
//   - an aborted transaction's batches are removed whole (only an emptied
//     batch stays where it is its producer's last, as for any batch), and
//     its records never enter the offset map, so they supersede nothing;
//   - a committed transaction's records are compacted like any others;
//   - a transaction marker stays while any record of its transaction does
//     (a read_committed consumer needs it to settle them), then
//     delete.retention.ms past its timestamp, so a consumer that read the
//     transaction's records before they were removed still finds it; then
//     it is removed, unless it is its producer's last batch.

// txnTracker follows transactions through one pass, in offset order.
type txnTracker struct {
	aborted map[int64][]AbortedTxn // by producer ID
	// hasData marks producers whose current transaction keeps records in
	// the cleaned log; its marker resets it.
	hasData map[int64]bool
}

func newTxnTracker(aborted []AbortedTxn) *txnTracker {
	t := &txnTracker{aborted: map[int64][]AbortedTxn{}, hasData: map[int64]bool{}}
	for _, a := range aborted {
		t.aborted[a.ProducerID] = append(t.aborted[a.ProducerID], a)
	}
	return t
}

// abortedData reports whether h is a data batch of an aborted transaction.
func (t *txnTracker) abortedData(h BatchHeader) bool {
	if !h.Transactional() || h.Control() {
		return false
	}
	for _, a := range t.aborted[h.ProducerID] {
		if a.FirstOffset <= h.BaseOffset && h.BaseOffset < a.LastOffset {
			return true
		}
	}
	return false
}

// kept notes that a transactional data batch of h's producer keeps records.
func (t *txnTracker) kept(h BatchHeader, records int) {
	if h.Transactional() && !h.Control() && records > 0 {
		t.hasData[h.ProducerID] = true
	}
}

// dropMarker reports whether the control batch b (header h) can go: a
// transaction marker whose transaction kept no records, older than the
// delete horizon (ms). It ends the producer's transaction either way.
func (t *txnTracker) dropMarker(h BatchHeader, b []byte, deleteHorizon int64) bool {
	typ, _, ok := parseControlRecord(b)
	if !ok || (typ != controlTypeAbort && typ != controlTypeCommit) {
		return false
	}
	hadData := t.hasData[h.ProducerID]
	delete(t.hasData, h.ProducerID)
	return !hadData && h.MaxTimestamp < deleteHorizon
}
