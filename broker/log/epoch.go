package log

import (
	"fmt"
	"path/filepath"
)

// Leader epoch cache (KIP-101, KIP-279): the start offset of each leader
// epoch seen in this log, oldest first. A follower asks the leader for the
// end offset of its latest epoch and truncates there, so logs that diverged
// during a leadership change converge without losing committed records.
// Persisted in leader-epoch-checkpoint as "epoch startOffset" lines.

// epochEntry is the first offset written under an epoch.
type epochEntry struct {
	epoch       int32
	startOffset int64
}

// UndefinedEpoch is returned by EndOffsetForEpoch for an unknown epoch, with
// end offset UndefinedEpochOffset, as in Kafka's OffsetForLeaderEpoch.
const (
	UndefinedEpoch       int32 = -1
	UndefinedEpochOffset int64 = -1
)

func (l *Log) loadEpochs() error {
	entries, err := readCheckpoint(filepath.Join(l.dir, epochFile), 2)
	if err != nil {
		return err
	}
	for _, e := range entries {
		l.epochs = append(l.epochs, epochEntry{epoch: int32(e[0]), startOffset: e[1]})
	}
	return nil
}

func (l *Log) persistEpochsLocked() error {
	entries := make([][]int64, len(l.epochs))
	for i, e := range l.epochs {
		entries[i] = []int64{int64(e.epoch), e.startOffset}
	}
	if err := writeCheckpoint(filepath.Join(l.dir, epochFile), entries); err != nil {
		return fmt.Errorf("log: writing leader epoch checkpoint: %w", err)
	}
	return nil
}

// assignEpochLocked records that epoch starts at offset, if epoch is newer
// than the latest known. Caller holds appendMu.
func (l *Log) assignEpochLocked(epoch int32, offset int64) error {
	if n := len(l.epochs); n > 0 && l.epochs[n-1].epoch >= epoch {
		return nil
	}
	l.mu.Lock()
	// An older entry starting at or after this offset came from a log
	// that has since been truncated past it; it no longer describes the log.
	for len(l.epochs) > 0 && l.epochs[len(l.epochs)-1].startOffset >= offset {
		l.epochs = l.epochs[:len(l.epochs)-1]
	}
	l.epochs = append(l.epochs, epochEntry{epoch: epoch, startOffset: offset})
	l.mu.Unlock()
	return l.persistEpochsLocked()
}

// truncateEpochsLocked drops epochs starting at or after end (TruncateTo).
// It reports whether anything changed. Caller holds appendMu.
func (l *Log) truncateEpochsLocked(end int64) bool {
	n := len(l.epochs)
	for n > 0 && l.epochs[n-1].startOffset >= end {
		n--
	}
	if n == len(l.epochs) {
		return false
	}
	l.mu.Lock()
	l.epochs = l.epochs[:n]
	l.mu.Unlock()
	return true
}

// truncateEpochsFromStartLocked forgets epochs wholly below start, moving
// the start of the one that contains it up to start (DeleteRecords).
func (l *Log) truncateEpochsFromStartLocked(start int64) bool {
	i := 0
	for i+1 < len(l.epochs) && l.epochs[i+1].startOffset <= start {
		i++
	}
	if i == 0 && (len(l.epochs) == 0 || l.epochs[0].startOffset >= start) {
		return false
	}
	l.mu.Lock()
	kept := append([]epochEntry(nil), l.epochs[i:]...)
	if kept[0].startOffset < start {
		kept[0].startOffset = start
	}
	l.epochs = kept
	l.mu.Unlock()
	return true
}

// LatestEpoch is the newest leader epoch in the log, or -1 if none.
func (l *Log) LatestEpoch() int32 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if len(l.epochs) == 0 {
		return UndefinedEpoch
	}
	return l.epochs[len(l.epochs)-1].epoch
}

// EndOffsetForEpoch answers OffsetForLeaderEpoch: for the latest epoch, the
// log end offset; for an older one, the start offset of the next higher
// epoch, together with the largest epoch at or below the one asked for (or
// the asked epoch if it predates all); for an unknown newer epoch,
// (UndefinedEpoch, UndefinedEpochOffset).
func (l *Log) EndOffsetForEpoch(epoch int32) (leaderEpoch int32, endOffset int64) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if epoch == UndefinedEpoch || len(l.epochs) == 0 {
		return UndefinedEpoch, UndefinedEpochOffset
	}
	if l.epochs[len(l.epochs)-1].epoch == epoch {
		return epoch, l.endOffset
	}
	higher := -1
	for i, e := range l.epochs {
		if e.epoch > epoch {
			higher = i
			break
		}
	}
	if higher < 0 {
		return UndefinedEpoch, UndefinedEpochOffset
	}
	if higher == 0 {
		return epoch, l.epochs[0].startOffset
	}
	return l.epochs[higher-1].epoch, l.epochs[higher].startOffset
}
