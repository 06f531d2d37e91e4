package log

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
)

// file is the slice of *os.File the log uses. Tests substitute an
// implementation that fails or writes short to exercise the error paths.
type file interface {
	io.ReaderAt
	io.WriterAt
	Sync() error
	Truncate(size int64) error
	Close() error
	Stat() (os.FileInfo, error)
}

// openFileFunc opens a segment or index file.
type openFileFunc func(path string, flag int, perm os.FileMode) (file, error)

func openOSFile(path string, flag int, perm os.FileMode) (file, error) {
	f, err := os.OpenFile(path, flag, perm)
	if err != nil {
		return nil, err
	}
	return f, nil
}

// File names inside a partition directory.
const (
	// logSuffix: segment data, the record batches back to back.
	logSuffix = ".log"
	// indexSuffix: the segment's offset index.
	indexSuffix = ".index"
	// timeIndexSuffix: the segment's time index.
	timeIndexSuffix = ".timeindex"
	// deletedSuffix: appended to a segment file's name when retention or
	// truncation removes it; the file is unlinked once no reader holds it,
	// and any left over at startup are removed.
	deletedSuffix = ".deleted"
)

// segmentSuffixes are the files of one segment.
var segmentSuffixes = []string{logSuffix, indexSuffix, timeIndexSuffix, txnIndexSuffix}

const (
	// cleanShutdownFile: written by Close after everything is fsynced; Open
	// deletes it, so its absence at the next Open means the log was not
	// closed cleanly and must be scanned from the recovery point.
	cleanShutdownFile = ".clean-shutdown"
	// recoveryPointFile: checkpoint, one offset below which everything was fsynced.
	recoveryPointFile = "recovery-point-offset-checkpoint"
	// startOffsetFile: checkpoint, the log start offset set by AdvanceStartOffset.
	startOffsetFile = "log-start-offset-checkpoint"
	// epochFile: checkpoint, the leader epoch start offsets (KIP-101).
	epochFile = "leader-epoch-checkpoint"
	// checkpointVersion: first line of every checkpoint file.
	checkpointVersion = 0
	// baseOffsetDigits: width of the zero-padded base offset in segment names.
	baseOffsetDigits = 20
)

// segmentPath returns dir/<20-digit base>.suffix.
func segmentPath(dir string, base int64, suffix string) string {
	return filepath.Join(dir, fmt.Sprintf("%0*d%s", baseOffsetDigits, base, suffix))
}

// parseSegmentName returns the base offset of a "<20 digits>.log" name.
func parseSegmentName(name string) (int64, bool) {
	if len(name) != baseOffsetDigits+len(logSuffix) || filepath.Ext(name) != logSuffix {
		return 0, false
	}
	v, err := strconv.ParseInt(name[:baseOffsetDigits], 10, 64)
	if err != nil || v < 0 {
		return 0, false
	}
	return v, true
}
