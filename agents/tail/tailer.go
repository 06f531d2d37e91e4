package tail

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/agents/ship"
	"millrace/audit"
)

// Producer is what the tailer ships through; *ship.Shipper implements it.
// Each reused line record wraps its acknowledgement once (Wrap) and sends
// with ProduceWrapped, which may block while the producer's buffer is full:
// that is how the tailer stops reading while the broker is down.
type Producer interface {
	Wrap(ack ship.AckFunc) ship.Promise
	ProduceWrapped(ctx context.Context, rec *kgo.Record, p ship.Promise)
}

// ErrUnacknowledged is returned by Shutdown when its deadline passed with
// lines still unacknowledged; they stay after the checkpoint and are read
// again on the next start.
var ErrUnacknowledged = errors.New("tail: shutdown deadline passed with lines unacknowledged")

// Tailer follows files and ships their lines. Create it with New, run it
// with Start, stop it with Shutdown.
type Tailer struct {
	cfg       Config
	producer  Producer
	logger    *slog.Logger
	metrics   *metrics
	enc       *encoder
	multiline *regexp.Regexp
	timestamp *timestampParser // nil unless timestamp.pattern is set

	// Owned by the loop goroutine.
	watcher  *fsnotify.Watcher // nil if inotify is unavailable; rescans still run
	watched  map[string]bool
	orderSeq uint64
	open     int
	buf      []byte
	idBuf    []byte      // event id scratch for ship
	valueBuf []byte      // record value scratch for ship
	chunk    *valueChunk // where ship puts values now
	fpBuf    []byte      // fingerprint_bytes, for checking files' first bytes
	scanDue  bool
	lastScan time.Time
	// skippedLinks are the symlinks the last scan skipped, so each is
	// logged once while it stays matched.
	skippedLinks map[string]bool

	auditor *audit.Counter // publishes the persisted ledger; nil when the audit is off (audit.go)

	mu      sync.Mutex // guards the following
	files   []*harvester
	dormant map[string]RegistryEntry // registry entries not matched to a followed file
	// retiredFiles were replaced after a truncation with lines in flight,
	// whose acknowledgements still count (audit.go); dropped once settled.
	retiredFiles  []*harvester
	ledger        map[ledgerKey]int64 // audit counts of lines before the checkpoints (audit.go)
	ledgerChanged bool                // since the last registry write

	lines  recycler[lineRecord] // acknowledged lines for ship to reuse
	chunks recycler[valueChunk] // value chunks whose lines were all acknowledged

	retryMu sync.Mutex // guards the following
	retries []retry

	regMu       sync.Mutex // serialises registry writes; guards the following
	lastEntries []RegistryEntry

	parent   context.Context
	runCtx   context.Context
	cancel   context.CancelFunc
	stop     chan struct{}
	stopOnce sync.Once
	wakeCh   chan struct{}
	loopDone chan struct{}
	wg       sync.WaitGroup
}

// retry is a record to produce again after a retryable failure.
type retry struct {
	line *lineRecord
	at   time.Time
}

// New checks cfg (after defaults) and registers metrics with reg (nil
// registers none).
func New(cfg Config, producer Producer, reg prometheus.Registerer, logger *slog.Logger) (*Tailer, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if producer == nil {
		return nil, errors.New("tail: a producer is required")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("tail: registering metrics: %w", err)
	}
	t := &Tailer{
		cfg:      cfg,
		producer: producer,
		logger:   logger.With("component", "tail", "topic", cfg.Topic),
		metrics:  m,
		enc:      newEncoder(cfg.Host, cfg.Fields),
		watched:  map[string]bool{},
		buf:      make([]byte, 256<<10),
		fpBuf:    make([]byte, cfg.FingerprintBytes),
		dormant:  map[string]RegistryEntry{},
		ledger:   map[ledgerKey]int64{},
		stop:     make(chan struct{}),
		wakeCh:   make(chan struct{}, 1),
		loopDone: make(chan struct{}),
	}
	if cfg.Multiline.StartPattern != "" {
		t.multiline = regexp.MustCompile(cfg.Multiline.StartPattern) // validated above
	}
	if cfg.Timestamp.Pattern != "" {
		if t.timestamp, err = newTimestampParser(cfg.Timestamp); err != nil {
			return nil, err // Validate compiled it already
		}
	}
	return t, nil
}

// Config returns the configuration in use, defaults applied.
func (t *Tailer) Config() Config { return t.cfg }

// Start loads the registry and starts following files. Canceling ctx stops
// the tailer abruptly, like a crash: no final checkpoint is written (call
// Shutdown afterwards to wait for its goroutines).
func (t *Tailer) Start(ctx context.Context) error {
	if err := os.MkdirAll(t.cfg.DataDir, 0o755); err != nil {
		return fmt.Errorf("tail: data_dir: %w", err)
	}
	rf, err := readRegistryFile(t.cfg.DataDir)
	if err != nil {
		return err
	}
	entries := rf.Files
	for _, e := range entries {
		t.dormant[e.ID] = e
	}
	if err := t.loadLedger(rf.Audit); err != nil {
		return err
	}
	// The restored counts are published again: the same totals, so the
	// audit's latest-wins records do not change.
	t.mu.Lock()
	counts := t.ledgerSnapshotLocked(time.Now())
	t.mu.Unlock()
	t.publishAudit(counts)
	w, err := fsnotify.NewWatcher()
	if err != nil {
		t.logger.Warn("file events unavailable; relying on rescans and polling", "err", err)
	} else {
		t.watcher = w
	}
	t.parent = ctx
	t.runCtx, t.cancel = context.WithCancel(ctx)
	t.wg.Add(2)
	go func() {
		defer t.wg.Done()
		defer close(t.loopDone)
		t.loop()
	}()
	go func() {
		defer t.wg.Done()
		t.checkpointer()
	}()
	t.logger.Info("tailing", "paths", t.cfg.Paths, "data_dir", t.cfg.DataDir, "known_files", len(entries))
	return nil
}

// Shutdown stops reading, waits until ctx's deadline for the broker to
// acknowledge what was shipped, writes the final checkpoint and releases
// every descriptor. Lines left unacknowledged are read again next start.
func (t *Tailer) Shutdown(ctx context.Context) error {
	if t.cancel == nil {
		return nil // never started
	}
	t.stopOnce.Do(func() { close(t.stop) })
	killed := t.parent.Err() != nil
	select {
	case <-t.loopDone:
	case <-ctx.Done():
		t.cancel() // unblocks a Produce waiting for buffer space
		<-t.loopDone
	}
	var err error
	if !killed {
		tick := time.NewTicker(10 * time.Millisecond)
	drain:
		for t.inflight() > 0 {
			select {
			case <-ctx.Done():
				err = ErrUnacknowledged
				break drain
			case <-tick.C:
			}
		}
		tick.Stop()
	}
	t.cancel()
	t.wg.Wait()
	if !killed {
		if perr := t.persist(); perr != nil {
			err = errors.Join(err, perr)
		}
	}
	return err
}

func (t *Tailer) stopping() bool {
	select {
	case <-t.stop:
		return true
	default:
		return t.runCtx.Err() != nil
	}
}

func (t *Tailer) wake() {
	select {
	case t.wakeCh <- struct{}{}:
	default:
	}
}

func (t *Tailer) inflight() int {
	t.mu.Lock()
	files := append([]*harvester(nil), t.files...)
	t.mu.Unlock()
	n := 0
	for _, h := range files {
		n += h.inflightCount()
	}
	return n
}

// loop is the tailer's one reading goroutine: it owns every harvester's
// reading state and every descriptor, so none of that needs locks.
func (t *Tailer) loop() {
	defer t.closeAll()
	t.scan(true)
	for !t.stopping() {
		t.drainEvents()
		if t.scanDue && time.Since(t.lastScan) >= 50*time.Millisecond || time.Since(t.lastScan) >= t.cfg.ScanFrequency {
			t.scan(false)
		}
		t.housekeep(time.Now())
		if t.readPass() {
			continue
		}
		// Nothing to read: let what is kept for reuse go.
		t.lines.drop()
		t.chunks.drop()
		wait := t.cfg.PollInterval
		if t.scanDue {
			wait = 50 * time.Millisecond
		}
		timer := time.NewTimer(wait)
		var events chan fsnotify.Event
		var errs chan error
		if t.watcher != nil {
			events, errs = t.watcher.Events, t.watcher.Errors
		}
		select {
		case <-t.stop:
		case <-t.runCtx.Done():
		case <-t.wakeCh:
		case ev, ok := <-events:
			if ok {
				t.handleEvent(ev)
			}
		case err, ok := <-errs:
			if ok {
				t.logger.Warn("file events", "err", err)
				t.scanDue = true
			}
		case <-timer.C:
		}
		timer.Stop()
	}
}

func (t *Tailer) drainEvents() {
	if t.watcher == nil {
		return
	}
	for range 1024 {
		select {
		case ev, ok := <-t.watcher.Events:
			if !ok {
				return
			}
			t.handleEvent(ev)
		case err, ok := <-t.watcher.Errors:
			if !ok {
				return
			}
			// Usually an overflowed event queue: a rescan finds what was missed.
			t.logger.Warn("file events", "err", err)
			t.scanDue = true
		default:
			return
		}
	}
}

func (t *Tailer) handleEvent(ev fsnotify.Event) {
	if ev.Has(fsnotify.Create) || ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) {
		t.scanDue = true
		return
	}
	if ev.Has(fsnotify.Write) {
		for _, h := range t.files {
			if h.file == nil && !h.gone && h.currentPath() == ev.Name {
				h.wantOpen = true
			}
		}
	}
}

// closeAll releases every descriptor and the watcher when the loop ends.
func (t *Tailer) closeAll() {
	for _, h := range t.files {
		t.closeFile(h)
	}
	if t.watcher != nil {
		if err := t.watcher.Close(); err != nil {
			t.logger.Warn("closing file watcher", "err", err)
		}
	}
}

func (t *Tailer) closeFile(h *harvester) {
	if h.file == nil {
		return
	}
	if err := h.file.Close(); err != nil {
		t.logger.Warn("closing file", "path", h.currentPath(), "err", err)
	}
	h.file = nil
	t.open--
	t.metrics.filesOpen.Set(float64(t.open))
}

func (h *harvester) currentPath() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.path
}

// recordKey expands the key template for a source path.
func (t *Tailer) recordKey(source string) []byte {
	if t.cfg.Key == "none" {
		return nil
	}
	return []byte(strings.NewReplacer("{host}", t.cfg.Host, "{path}", source).Replace(t.cfg.Key))
}
