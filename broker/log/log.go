package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"millrace/internal/durable"

	"millrace/internal/recordbatch"
)

// Log is one partition's log. One writer at a time (Append, AppendReplicated,
// TruncateTo, Roll, Flush, retention and config changes serialise on an
// internal mutex); any number of concurrent readers, which never wait for an
// fsync.
type Log struct {
	dir      string
	logger   *slog.Logger
	now      func() time.Time
	openFile openFileFunc         // opens segment files through files
	rawOpen  openFileFunc         // the opener files wraps
	files    *fileCache           // holds the descriptors of the segment files
	decoder  *recordbatch.Decoder // decompression limits: the Manager's, shared by its logs

	appendMu      sync.Mutex // serialises writers; guards the following
	unflushed     int64      // records appended since the last fsync
	recoveryPoint int64      // offset below which everything is fsynced
	writeErr      error      // sticky: set by a failed write or fsync, refuses further writes (recover_writes.go)
	// writeErrInPlace: the failure left disk and memory agreeing, so
	// RecoverWrites may clear writeErr without a reopen.
	writeErrInPlace bool

	flush flushState // fsync on demand (group commit) and the flush.ms timer; see flush.go

	replace replaceState // segment replacement for the cleaner; see replace.go

	retiring retiring // deleted segments waiting out file.delete.delay.ms; see retire.go

	cleaner cleanerState // compaction progress; see cleaner.go

	producers producerState // idempotent-producer state; its lock is taken before appendMu (producers.go)

	// txnStateLoaded mirrors producers.loaded for lock-free readers.
	txnStateLoaded atomic.Bool

	mu          sync.RWMutex // guards the following; never held across an fsync
	cfg         Config
	segments    []*segment // by base offset; the last one is active
	startOffset int64
	endOffset   int64
	epochs      []epochEntry
	closed      bool

	// refusing mirrors writeErr != nil for lock-free readers (metrics).
	refusing atomic.Bool
	// toldNeedsReopen: the Manager logged that only a restart recovers it.
	toldNeedsReopen atomic.Bool

	// remoteEnd is the offset below which every record is stored
	// remotely, on a tiered log (remote.go).
	remoteEnd atomic.Int64
	// untiered is options.untiered; toldUntiered: the log warned that it
	// retains a remote.storage.enable log by the total limits.
	untiered     bool
	toldUntiered atomic.Bool

	// recoveredSegments counts segments Open scanned batch by batch; a clean
	// restart leaves it at zero. Tests read it.
	recoveredSegments atomic.Int64
}

// options are the test hooks of openLog.
type options struct {
	now      func() time.Time     // clock; time.Now if nil
	openFile openFileFunc         // file opener; the os one if nil
	files    *fileCache           // descriptor cache shared by a Manager's logs; a log of its own if nil
	decoder  *recordbatch.Decoder // decodes produced and cleaned batches; shared by a Manager's logs, a log's own if nil
	threads  int                  // logs a Manager opens or closes at once; 1 if below
	// untiered: the broker has tiered storage off, so a topic's
	// remote.storage.enable is not acted on (remote.go).
	untiered bool
}

// Open opens (creating if needed) the partition log in dir. After an unclean
// stop (no clean-shutdown marker) it scans every segment from the one holding
// the recovery point, truncates at the first torn or corrupt batch and
// rebuilds the indexes; after a clean Close it only loads the active
// segment's indexes. Before anything else it completes or undoes a segment
// replacement a crash interrupted (replace.go).
func Open(dir string, cfg Config, logger *slog.Logger) (*Log, error) {
	return openLog(dir, cfg, logger, options{})
}

func openLog(dir string, cfg Config, logger *slog.Logger, opts options) (*Log, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("log: open %s: %w", dir, err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if opts.now == nil {
		opts.now = time.Now
	}
	if opts.openFile == nil {
		opts.openFile = openOSFile
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("log: open %s: %w", dir, err)
	}
	if opts.files == nil {
		opts.files = newFileCache(0)
	}
	if opts.decoder == nil {
		opts.decoder = recordbatch.NewDecoder(0)
	}
	l := &Log{dir: dir, logger: logger.With("component", "log", "dir", filepath.Base(dir)), now: opts.now,
		openFile: opts.files.wrap(opts.openFile), rawOpen: opts.openFile, files: opts.files, decoder: opts.decoder, cfg: cfg, untiered: opts.untiered}
	l.producers.now, l.producers.cfg = opts.now, DefaultProducerStateConfig()
	l.producers.firstUnstable.Store(-1)
	if err := l.load(); err != nil {
		for _, s := range l.segments {
			s.release()
		}
		return nil, fmt.Errorf("log: open %s: %w", dir, err)
	}
	if err := l.loadPendingProducerSnapshot(); err != nil {
		for _, s := range l.segments {
			s.release()
		}
		return nil, fmt.Errorf("log: open %s: %w", dir, err)
	}
	if l.endOffset == l.startOffset {
		if _, err := os.Stat(filepath.Join(dir, producerSnapshotFile)); errors.Is(err, fs.ErrNotExist) {
			// A new log has no producers: its state is known now, where a
			// lazy load would scan everything written before the first
			// fetch or idempotent append needed it.
			l.producers.producers = make(map[int64]*producerEntry)
			l.producers.loaded = true
			l.txnStateLoaded.Store(true)
		}
	}
	// load left everything it found fsynced (a clean stop) or fsynced it.
	l.flush.durable.Store(l.endOffset)
	l.flush.dirSynced = l.segments[len(l.segments)-1]
	return l, nil
}

// load reads the directory and recovers the segments.
func (l *Log) load() error {
	if err := recoverReplacement(l.dir, l.logger); err != nil {
		return err
	}
	entries, err := os.ReadDir(l.dir)
	if err != nil {
		return err
	}
	var bases []int64
	hasLog := map[int64]bool{}
	hasTxnIndex := map[int64]bool{}
	for _, e := range entries {
		name := e.Name()
		if strings.HasSuffix(name, deletedSuffix) || strings.HasSuffix(name, ".tmp") {
			// Left by a deletion or checkpoint write cut short by a crash.
			if err := os.Remove(filepath.Join(l.dir, name)); err != nil {
				return err
			}
			continue
		}
		if base, ok := parseSegmentName(name); ok {
			bases = append(bases, base)
			hasLog[base] = true
		}
	}
	for _, e := range entries {
		name := e.Name()
		ext := filepath.Ext(name)
		if ext != indexSuffix && ext != timeIndexSuffix && ext != txnIndexSuffix {
			continue
		}
		base, ok := parseSegmentName(strings.TrimSuffix(name, ext) + logSuffix)
		if ok && !hasLog[base] {
			if err := os.Remove(filepath.Join(l.dir, name)); err != nil {
				return err
			}
		} else if ok && ext == txnIndexSuffix {
			hasTxnIndex[base] = true
		}
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })

	markerPath := filepath.Join(l.dir, cleanShutdownFile)
	_, statErr := os.Stat(markerPath)
	clean := statErr == nil
	if clean {
		// The marker must be gone for good before anything is appended, or a
		// later crash would be mistaken for a clean stop.
		if err := os.Remove(markerPath); err != nil {
			return err
		}
		if err := durable.SyncDir(l.dir); err != nil {
			return err
		}
	}
	recoveryPoint, _, err := readOffsetCheckpoint(filepath.Join(l.dir, recoveryPointFile))
	if err != nil {
		l.logger.Warn("unreadable recovery point, recovering from the start", "err", err)
		recoveryPoint, clean = 0, false
	}
	startOffset, _, err := readOffsetCheckpoint(filepath.Join(l.dir, startOffsetFile))
	if err != nil {
		l.logger.Warn("unreadable log start offset checkpoint, using the first segment", "err", err)
		startOffset = 0
	}
	if err := l.loadEpochs(); err != nil {
		l.logger.Warn("unreadable leader epoch checkpoint, starting empty", "err", err)
		l.epochs = nil
	}
	if len(bases) == 0 {
		s, err := newEmptySegment(l.dir, startOffset, l.openFile)
		if err != nil {
			return err
		}
		l.segments = []*segment{s}
	} else if err := l.loadSegments(bases, clean, recoveryPoint); err != nil {
		return err
	}
	active := l.segments[len(l.segments)-1]
	l.endOffset = active.nextOffset
	l.startOffset = max(startOffset, l.segments[0].baseOffset)
	if l.startOffset > l.endOffset {
		l.startOffset = l.endOffset
	}
	l.truncateEpochsLocked(l.endOffset)
	if err := l.loadTxnIndexes(hasTxnIndex, clean); err != nil {
		return err
	}
	if clean {
		l.recoveryPoint = min(recoveryPoint, l.endOffset)
		if recoveryPoint >= l.endOffset {
			return nil
		}
	}
	// Whatever recovery read is now the log; make it durable so the next
	// recovery starts here.
	for _, s := range l.segments {
		if s.loaded {
			s.dirty = true
		}
	}
	return l.flushLocked()
}

// loadSegments opens every segment. Segments wholly below the recovery point
// (or all but the active one after a clean stop) are trusted and their
// indexes loaded on first use.
func (l *Log) loadSegments(bases []int64, clean bool, recoveryPoint int64) error {
	interval := l.cfg.IndexIntervalBytes
	firstScanned := len(bases) - 1
	if !clean {
		firstScanned = 0
		for i, b := range bases {
			if b <= recoveryPoint {
				firstScanned = i
			}
		}
	}
	now := l.now()
	for i, base := range bases {
		if i < firstScanned {
			// Trusted: no descriptor until it is read (filecache.go).
			fi, err := os.Stat(segmentPath(l.dir, base, logSuffix))
			if err != nil {
				return err
			}
			s := newLazySegment(l.dir, base, l.openFile, l.files, l.rawOpen)
			l.segments = append(l.segments, s)
			s.size = fi.Size()
			s.nextOffset = bases[i+1]
			if err := s.loadMaxTimestamp(fi.ModTime()); err != nil {
				return err
			}
			continue
		}
		s, err := newSegment(l.dir, base, l.openFile)
		if err != nil {
			return err
		}
		l.segments = append(l.segments, s)
		fi, err := s.log.Stat()
		if err != nil {
			return err
		}
		size := fi.Size()
		s.firstAppend = now
		s.mu.Lock()
		if clean {
			var ok bool
			if ok, err = s.loadIndexesLocked(size); err == nil && ok {
				err = s.resumeLocked(size, interval)
				if err != nil {
					l.logger.Warn("index does not match the active segment, rebuilding it", "segment", base, "err", err)
				}
			}
			if err == nil && !ok {
				l.logger.Warn("damaged index files, rebuilding", "segment", base)
			}
			if err != nil || !ok {
				clean = false
			}
		}
		var end int64 = size
		if !clean {
			l.recoveredSegments.Add(1)
			end, err = s.rebuildLocked(size, interval, true)
		}
		s.mu.Unlock()
		if err != nil {
			return err
		}
		if end < size {
			l.logger.Warn("truncating torn or corrupt tail", "segment", base, "valid_bytes", end, "file_bytes", size, "next_offset", s.nextOffset)
			if err := s.log.Truncate(end); err != nil {
				return err
			}
		}
		if s.size == 0 && i > 0 && len(l.segments) > 1 {
			// An empty segment after another is harmless, but its base must
			// follow the previous segment or offsets would jump.
			prev := l.segments[len(l.segments)-2]
			if base != prev.nextOffset {
				l.logger.Warn("dropping empty segment that does not follow its predecessor", "segment", base)
				l.segments = l.segments[:len(l.segments)-1]
				if err := s.markDeleted(); err != nil {
					return err
				}
				if err := s.release(); err != nil {
					return err
				}
				end = -1
			}
		}
		if end >= 0 && end < size {
			// Everything after a damaged batch is unreliable: drop later segments.
			for _, later := range bases[i+1:] {
				l.logger.Warn("dropping segment after corrupt data", "segment", later)
				for _, suffix := range segmentSuffixes {
					if err := os.Remove(segmentPath(l.dir, later, suffix)); err != nil && !os.IsNotExist(err) {
						return err
					}
				}
			}
			return nil
		}
	}
	return nil
}

// loadMaxTimestamp sets the largest timestamp of a lazily opened segment from
// the last time index entry, falling back to the file's modification time
// (as Kafka does) when there is none.
func (s *segment) loadMaxTimestamp(modTime time.Time) error {
	s.maxTimestamp = modTime.UnixMilli()
	f, err := s.openFile(segmentPath(s.dir, s.baseOffset, timeIndexSuffix), os.O_RDONLY, 0)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	n := fi.Size() / timeIndexEntrySize
	if n == 0 {
		return nil
	}
	var b [timeIndexEntrySize]byte
	if _, err := f.ReadAt(b[:], (n-1)*timeIndexEntrySize); err != nil {
		return err
	}
	s.maxTimestamp = int64(binary.BigEndian.Uint64(b[timeEntryTimestamp:]))
	return nil
}

// AppendInfo describes a successful append.
type AppendInfo struct {
	FirstOffset   int64 // base offset of the first batch
	LastOffset    int64 // last offset of the last batch
	MaxTimestamp  int64 // largest batch timestamp
	LogAppendTime int64 // the broker's append time, -1 unless message.timestamp.type is LogAppendTime
	Records       int   // records appended
	Batches       []BatchHeader
	// Duplicate is set by AppendValidated for a retried idempotent batch
	// already in the log: nothing was appended, and FirstOffset and
	// LastOffset are the original batch's.
	Duplicate bool
}

// Append validates one or more concatenated producer batches, assigns them
// offsets from EndOffset(), stamps leaderEpoch, and appends them all or
// none. It is ValidateProduce under the log's config and clock followed by
// AppendValidated: the two steps a Produce takes (the handler looks at the
// headers between them), so what tests and benchmarks append goes the
// production path.
//
// The headers are rewritten in place in the caller's buffer: baseOffset and
// partitionLeaderEpoch (not covered by the CRC) and, for LogAppendTime,
// attributes, maxTimestamp and the CRC; for CreateTime, a maxTimestamp
// that is not the records' largest, and the CRC (setMaxTimestamp). The
// caller must not reuse it for another partition. Batches recompressed for
// the topic's compression.type are appended from a copy (recompress.go).
func (l *Log) Append(batches []byte, leaderEpoch int32) (AppendInfo, error) {
	v, err := l.ValidateProduce(batches, l.now())
	if err != nil {
		return AppendInfo{}, err
	}
	return l.AppendValidated(v, leaderEpoch)
}

// ValidBatches are producer batches that passed ValidateProduce, ready for
// AppendValidated: a caller that must look at the headers before appending
// (the Produce handler's idempotence checks) validates once, not twice.
type ValidBatches struct {
	bytes           []byte
	headers         []BatchHeader
	maxMessageBytes int             // the limit they were checked against
	txnVerification TxnVerification // see WithTxnVerification
}

// Headers are the batches' headers. AppendValidated rewrites them (base
// offset, leader epoch and, for LogAppendTime, timestamp and CRC).
func (v ValidBatches) Headers() []BatchHeader { return v.headers }

// ValidateProduce checks producer batches under the log's config at now
// (recordbatch's Decoder.Validate under produceRules, through the log's
// Decoder), recompresses them if the topic's compression.type asks for it
// (recompress.go), and keeps the result, headers included, for
// AppendValidated: each header is parsed once on the way from the request
// to the segment. It sets a CreateTime batch's maxTimestamp in b to its
// records' largest, as Kafka does (recordbatch's setMaxTimestamp). A batch
// refused for some of its records lists them in the *BatchError's Records.
func (l *Log) ValidateProduce(b []byte, now time.Time) (ValidBatches, error) {
	return validateProduce(l.decoder, b, l.Config(), now)
}

// validateProduce is ValidateProduce under cfg, decoding through d.
func validateProduce(d *recordbatch.Decoder, b []byte, cfg Config, now time.Time) (ValidBatches, error) {
	headers, err := d.Validate(b, cfg.MaxMessageBytes, produceRules(cfg, now))
	if err != nil {
		return ValidBatches{}, err
	}
	if b, headers, err = recompressBatches(d, b, headers, cfg); err != nil {
		return ValidBatches{}, err
	}
	return ValidBatches{bytes: b, headers: headers, maxMessageBytes: cfg.MaxMessageBytes}, nil
}

// AppendValidated is Append for batches already validated by
// ValidateProduce; only max.message.bytes is checked again, in case the
// configuration has lowered it since.
//
// A single idempotent batch (what a Produce request carries) is first
// checked against its producer's sequence under the producer lock, which is
// held until it is appended and recorded (producers.go): a retry of a batch
// already written is answered with AppendInfo.Duplicate, a refused one with
// a *ProducerError, and a state that cannot be loaded with an error
// wrapping ErrProducerState. A transactional batch whose transaction ended
// since its verification began is refused too (txn_verify.go).
func (l *Log) AppendValidated(v ValidBatches, leaderEpoch int32) (AppendInfo, error) {
	ps := &l.producers
	ps.mu.Lock()
	defer ps.mu.Unlock()
	txn := anyTransactional(v.headers)
	if txn {
		if err := l.ensureTxnStateLocked(); err != nil {
			return AppendInfo{}, err
		}
	}
	if len(v.headers) == 1 && isIdempotent(v.headers[0]) {
		if err := l.ensureProducersLoadedLocked(); err != nil {
			return AppendInfo{}, err
		}
		dup, err := ps.checkLocked(v.headers[0])
		if err != nil {
			return AppendInfo{}, err
		}
		if dup != nil {
			return AppendInfo{FirstOffset: dup.firstOffset, LastOffset: dup.lastOffset, MaxTimestamp: -1, LogAppendTime: -1, Duplicate: true}, nil
		}
		if err := ps.checkVerificationLocked(v.headers[0], v.txnVerification); err != nil {
			return AppendInfo{}, err
		}
	}
	if txn {
		l.holdStableHeadersLocked(v.headers)
	}
	info, err := l.appendValidated(v, leaderEpoch)
	l.afterAppendLocked(txn, info, v.bytes, err)
	l.settlePendingLocked(false)
	return info, err
}

// appendValidated is AppendValidated after the producer checks.
func (l *Log) appendValidated(v ValidBatches, leaderEpoch int32) (AppendInfo, error) {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.writableLocked(); err != nil {
		return AppendInfo{}, err
	}
	if len(v.headers) == 0 {
		return AppendInfo{}, &BatchError{Reason: "no record batches", Err: ErrCorruptBatch}
	}
	if limit := l.cfg.MaxMessageBytes; v.maxMessageBytes > limit {
		pos := 0
		for _, h := range v.headers {
			if h.Size() > limit {
				return AppendInfo{}, &BatchError{Position: pos, Reason: fmt.Sprintf("batch of %d bytes exceeds max.message.bytes %d", h.Size(), limit), Err: ErrBatchTooLarge}
			}
			pos += h.Size()
		}
	}
	return l.appendFreshLocked(v.bytes, v.headers, leaderEpoch)
}

// appendFreshLocked appends validated producer batches: offsets from the log
// end, leaderEpoch stamped, LogAppendTime applied.
func (l *Log) appendFreshLocked(batches []byte, headers []BatchHeader, leaderEpoch int32) (AppendInfo, error) {
	cfg := l.cfg
	if err := checkSegmentFit(headers, cfg.SegmentBytes); err != nil {
		return AppendInfo{}, err
	}
	now := l.now()
	info := AppendInfo{FirstOffset: l.endOffset, MaxTimestamp: -1, LogAppendTime: -1, Batches: headers}
	appendTime := cfg.MessageTimestampType == LogAppendTime
	if appendTime {
		info.LogAppendTime = now.UnixMilli()
	}
	next, pos := l.endOffset, 0
	for i := range headers {
		h := &headers[i]
		b := batches[pos : pos+h.Size()]
		binary.BigEndian.PutUint64(b[offBaseOffset:], uint64(next))
		binary.BigEndian.PutUint32(b[offLeaderEpoch:], uint32(leaderEpoch))
		h.BaseOffset, h.PartitionLeaderEpoch = next, leaderEpoch
		if appendTime {
			h.Attributes |= attrLogAppendTime
			h.MaxTimestamp = info.LogAppendTime
			binary.BigEndian.PutUint16(b[offAttributes:], uint16(h.Attributes))
			binary.BigEndian.PutUint64(b[offMaxTimestamp:], uint64(h.MaxTimestamp))
			h.CRC = crc32.Checksum(b[offAttributes:], castagnoli)
			binary.BigEndian.PutUint32(b[offCRC:], h.CRC)
		}
		info.MaxTimestamp = max(info.MaxTimestamp, h.MaxTimestamp)
		info.Records += int(h.Records)
		next = h.NextOffset()
		pos += h.Size()
	}
	info.LastOffset = next - 1
	if err := l.appendLocked(batches, headers, next, info.Records, now); err != nil {
		return AppendInfo{}, err
	}
	if leaderEpoch >= 0 {
		if err := l.assignEpochLocked(leaderEpoch, info.FirstOffset); err != nil {
			// The batches are in the log but the append is refused: the
			// log must refuse appends until a retry rewrites the epochs
			// and rebuilds the producer state (recover_writes.go).
			return info, l.failWritesLocked(err, true)
		}
	}
	return info, nil
}

// AppendReplicated appends batches copied from the leader, keeping their
// offsets and leader epochs. The first batch must start at or after
// EndOffset() and each after the previous, else ErrOffsetMismatch. A batch
// may start past the end: the leader's cleaner removed the records between
// (cleaner.go), and the offsets skipped stay unused here too, as in
// Kafka's follower, which only refuses offsets that go backwards.
func (l *Log) AppendReplicated(batches []byte) (AppendInfo, error) {
	l.producers.mu.Lock()
	defer l.producers.mu.Unlock()
	txn := hasTransactional(batches)
	if txn {
		// Transactional batches and markers are recorded as they are
		// replicated, so a follower that becomes leader knows the
		// ongoing transactions and the aborted ones.
		if err := l.ensureTxnStateLocked(); err != nil {
			return AppendInfo{}, err
		}
		l.holdStableLocked(batches)
	}
	info, err := l.appendReplicated(batches)
	l.afterAppendLocked(txn, info, batches, err)
	l.settlePendingLocked(true)
	return info, err
}

// appendReplicated is AppendReplicated under the producer lock.
func (l *Log) appendReplicated(batches []byte) (AppendInfo, error) {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.writableLocked(); err != nil {
		return AppendInfo{}, err
	}
	cfg := l.cfg
	// The leader already enforced its max.message.bytes; ours may differ.
	headers, err := recordbatch.ValidateStored(batches, maxInt)
	if err != nil {
		return AppendInfo{}, err
	}
	if err := checkSegmentFit(headers, cfg.SegmentBytes); err != nil {
		return AppendInfo{}, err
	}
	info := AppendInfo{FirstOffset: headers[0].BaseOffset, MaxTimestamp: -1, LogAppendTime: -1, Batches: headers}
	next := l.endOffset
	for _, h := range headers {
		if h.BaseOffset < next {
			return AppendInfo{}, fmt.Errorf("%w: batch at offset %d, expected %d or later", ErrOffsetMismatch, h.BaseOffset, next)
		}
		info.MaxTimestamp = max(info.MaxTimestamp, h.MaxTimestamp)
		info.Records += int(h.Records)
		next = h.NextOffset()
	}
	info.LastOffset = next - 1
	if err := l.appendLocked(batches, headers, next, info.Records, l.now()); err != nil {
		return AppendInfo{}, err
	}
	for _, h := range headers {
		if h.PartitionLeaderEpoch >= 0 {
			if err := l.assignEpochLocked(h.PartitionLeaderEpoch, h.BaseOffset); err != nil {
				return info, l.failWritesLocked(err, true)
			}
		}
	}
	return info, nil
}

const maxInt = int(^uint(0) >> 1)

// checkSegmentFit rejects a batch that could never fit in a segment.
func checkSegmentFit(headers []BatchHeader, segmentBytes int64) error {
	pos := 0
	for _, h := range headers {
		if int64(h.Size()) > segmentBytes {
			return &BatchError{Position: pos, Reason: fmt.Sprintf("batch of %d bytes exceeds segment.bytes %d", h.Size(), segmentBytes), Err: ErrBatchTooLarge}
		}
		pos += h.Size()
	}
	return nil
}

// writableLocked returns why the log cannot be written, if it cannot.
func (l *Log) writableLocked() error {
	if l.closed {
		return ErrClosed
	}
	return l.writeErr
}

// appendLocked writes validated batches whose headers are final, rolling
// first if needed, then publishes them to readers.
func (l *Log) appendLocked(batches []byte, headers []BatchHeader, next int64, records int, now time.Time) error {
	cfg := l.cfg
	s := l.segments[len(l.segments)-1]
	if s.size > 0 && l.shouldRollLocked(s, cfg, int64(len(batches)), next, now) {
		if err := l.rollLocked(); err != nil {
			return err
		}
		l.snapshotAtRollLocked()
		s = l.segments[len(l.segments)-1]
	}
	pos := s.size
	n, err := s.log.WriteAt(batches, pos)
	if err == nil && n != len(batches) {
		err = io.ErrShortWrite
	}
	if err != nil {
		// Take back a partial write so the file stays a sequence of whole
		// batches; the log stays read-only either way.
		if terr := s.log.Truncate(pos); terr != nil {
			err = errors.Join(err, terr)
		}
		l.logger.Error("append failed; the log refuses appends until a retry succeeds", "err", err)
		return l.failWritesLocked(fmt.Errorf("log: write to segment %d failed; log refuses appends until a retry succeeds: %w", s.baseOffset, err), true)
	}
	l.mu.Lock()
	s.mu.Lock()
	if s.size == 0 {
		s.firstAppend = now
	}
	p := pos
	for _, h := range headers {
		s.noteBatchLocked(h.BaseOffset, h.NextOffset(), p, h.Size(), h.MaxTimestamp, cfg.IndexIntervalBytes)
		p += int64(h.Size())
	}
	l.endOffset = next
	s.mu.Unlock()
	l.mu.Unlock()
	l.noteAppendLocked(now)
	l.unflushed += int64(records)
	if l.unflushed >= cfg.FlushMessages {
		return l.flushLocked()
	}
	return nil
}

// shouldRollLocked reports whether the non-empty active segment s must be
// rolled before appending n bytes ending at offset next.
func (l *Log) shouldRollLocked(s *segment, cfg Config, n int64, next int64, now time.Time) bool {
	s.mu.Lock()
	indexFull := (len(s.index)+1)*offsetIndexEntrySize > cfg.SegmentIndexBytes || (len(s.times)+1)*timeIndexEntrySize > cfg.SegmentIndexBytes
	s.mu.Unlock()
	return s.size+n > cfg.SegmentBytes ||
		now.Sub(s.firstAppend) >= cfg.maxSegmentAge() ||
		indexFull ||
		next-1-s.baseOffset > maxRelativeOffset
}

// Roll closes the active segment for appends and starts a new one at
// EndOffset(). It does nothing if the active segment is empty.
func (l *Log) Roll() error {
	l.producers.mu.Lock()
	defer l.producers.mu.Unlock()
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.writableLocked(); err != nil {
		return err
	}
	if l.segments[len(l.segments)-1].size == 0 {
		return nil
	}
	if err := l.rollLocked(); err != nil {
		return err
	}
	l.snapshotAtRollLocked()
	return nil
}

func (l *Log) rollLocked() error {
	old := l.segments[len(l.segments)-1]
	old.mu.Lock()
	// A final time index entry makes the file's last entry the segment's
	// largest timestamp, which retention reads after a restart.
	old.appendTimeEntryLocked()
	err := old.persistIndexesLocked()
	old.mu.Unlock()
	if err != nil {
		return l.failWritesLocked(fmt.Errorf("log: writing index of segment %d: %w", old.baseOffset, err), true)
	}
	s, err := newEmptySegment(l.dir, l.endOffset, l.openFile)
	if err != nil {
		return fmt.Errorf("log: roll: %w", err)
	}
	l.mu.Lock()
	l.segments = append(l.segments, s)
	l.mu.Unlock()
	l.logger.Debug("rolled segment", "base_offset", s.baseOffset, "previous_bytes", old.size)
	return nil
}

// Flush fsyncs every segment written since the last flush, then advances
// and checkpoints the recovery point.
func (l *Log) Flush() error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.writableLocked(); err != nil {
		return err
	}
	return l.flushLocked()
}

// flushLocked writes pending index entries (briefly under each segment's
// lock) and fsyncs outside every lock readers take, so reads never wait.
func (l *Log) flushLocked() error {
	end := l.endOffset
	for _, s := range l.segments {
		if !s.dirty && !s.txnUnsynced.Load() {
			continue
		}
		s.mu.Lock()
		err := s.persistIndexesLocked()
		indexFile, timeFile := s.indexFile, s.timeFile
		s.mu.Unlock()
		if err != nil {
			l.logger.Error("writing indexes failed", "err", err)
			return l.failWritesLocked(fmt.Errorf("log: writing indexes of segment %d failed; log refuses appends until a retry succeeds: %w", s.baseOffset, err), true)
		}
		err = s.log.Sync()
		if err == nil && indexFile != nil {
			err = errors.Join(indexFile.Sync(), timeFile.Sync())
		}
		if err == nil {
			err = l.syncTxnIndex(s)
		}
		if err != nil {
			l.logger.Error("flush failed", "err", err)
			return l.failWritesLocked(fmt.Errorf("log: fsync of segment %d failed; log refuses appends until reopened: %w", s.baseOffset, err), false)
		}
		s.dirty = false
	}
	l.unflushed = 0
	if end != l.recoveryPoint || !fileExists(filepath.Join(l.dir, recoveryPointFile)) {
		if err := writeCheckpoint(l.recoveryPointPath(), [][]int64{{end}}); err != nil {
			return l.failWritesLocked(fmt.Errorf("log: writing recovery point: %w", err), true)
		}
		l.recoveryPoint = end
	}
	l.markDurableLocked(end)
	return nil
}

// recoveryPointPath is the recovery point checkpoint's file.
func (l *Log) recoveryPointPath() string { return filepath.Join(l.dir, recoveryPointFile) }

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// StartOffset is the first offset a read may ask for.
func (l *Log) StartOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.startOffset
}

// EndOffset is the log end offset: the offset the next record will get.
func (l *Log) EndOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.endOffset
}

// SetConfig changes the configuration; it applies from the next append.
func (l *Log) SetConfig(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.beforeConfigLocked(cfg); err != nil {
		return err
	}
	l.mu.Lock()
	l.cfg = cfg
	l.mu.Unlock()
	l.rearmFlushTimerLocked()
	return nil
}

// Config returns the current configuration.
func (l *Log) Config() Config {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.cfg
}

// Dir is the partition directory.
func (l *Log) Dir() string { return l.dir }

// SegmentInfo describes one segment.
type SegmentInfo struct {
	BaseOffset   int64
	NextOffset   int64 // offset after its last batch
	Size         int64 // bytes
	MaxTimestamp int64 // largest timestamp, -1 if none
}

// Segments describes the segments, oldest first.
func (l *Log) Segments() []SegmentInfo {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := make([]SegmentInfo, len(l.segments))
	for i, s := range l.segments {
		out[i] = SegmentInfo{BaseOffset: s.baseOffset, NextOffset: s.nextOffset, Size: s.size, MaxTimestamp: s.maxTimestamp}
	}
	return out
}

// Size is the total size of the segments in bytes.
func (l *Log) Size() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var n int64
	for _, s := range l.segments {
		n += s.size
	}
	return n
}

// Close flushes, writes the clean-shutdown marker and releases the files
// (a segment still read by a Slice closes when the Slice does). No marker is
// written if a write had failed, so the next Open recovers.
//
// It writes the producer state snapshot first, if the state was loaded.
func (l *Log) Close() error { return l.close(true) }

func (l *Log) close(snapshot bool) error {
	// After the unlock: a firing timer takes appendMu itself.
	defer l.flush.timer.stop()
	l.producers.mu.Lock()
	defer l.producers.mu.Unlock()
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.closed {
		return nil
	}
	if snapshot {
		l.maintainProducersLocked(true)
	}
	var errs []error
	if l.writeErr == nil {
		active := l.segments[len(l.segments)-1]
		active.mu.Lock()
		active.appendTimeEntryLocked()
		active.mu.Unlock()
		active.dirty = true
		err := l.flushLocked()
		if err == nil {
			err = durable.WriteFile(filepath.Join(l.dir, cleanShutdownFile), nil)
		}
		errs = append(errs, err)
	}
	l.mu.Lock()
	l.closed = true
	segments := l.segments
	l.mu.Unlock()
	for _, s := range segments {
		errs = append(errs, s.release())
	}
	errs = append(errs, l.closeRetiring())
	return errors.Join(errs...)
}

// Delete closes the log and removes its directory (topic deletion).
// No producer state snapshot is written for a directory about to go.
func (l *Log) Delete() error {
	err := l.close(false)
	if rerr := os.RemoveAll(l.dir); rerr != nil {
		return errors.Join(err, rerr)
	}
	return nil
}
