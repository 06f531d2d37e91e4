package log

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"millrace/internal/recordbatch"
)

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// String is the partition's directory name, <topic>-<partition>.
func (tp TopicPartition) String() string {
	return tp.Topic + "-" + strconv.FormatInt(int64(tp.Partition), 10)
}

// DefaultRetentionCheckInterval is Kafka's log.retention.check.interval.ms.
const DefaultRetentionCheckInterval = 5 * time.Minute

// Manager owns every partition log of one data directory, one subdirectory
// <topic>-<partition> each, and runs retention and flush.ms checks and the
// producer state snapshots.
type Manager struct {
	dataDir  string
	defaults Config
	logger   *slog.Logger
	opts     options

	// refusing is the set recoverWrites found refusing appends (Refusing).
	refusing atomic.Pointer[map[TopicPartition]bool]

	mu          sync.Mutex // guards the following
	logs        map[TopicPartition]*Log
	producerCfg ProducerStateConfig // given to every log
	closed      bool
	started     bool // Start ran
	// retentionBound gives each partition's high watermark to retention
	// (EnforceRetentionBelow); nil on a lone broker.
	retentionBound func(TopicPartition) (int64, bool)
	stop           chan struct{} // closed by Close to end the background goroutine
	wg             sync.WaitGroup
}

// ManagerOption changes how OpenManager opens the logs.
type ManagerOption func(*managerOptions)

type managerOptions struct {
	maxOpenFiles    int
	recoveryThreads int
	untiered        bool
}

// DefaultRecoveryThreads is millrace's default of Kafka's
// num.recovery.threads.per.data.dir (Kafka's is 1). Opening a partition
// is mostly waiting on the disk (a directory fsync after a clean stop, the
// recovery scan and fsyncs after a crash), so several at once overlap the
// waits: with 10,000 partitions one thread makes start-up and shutdown
// take minutes.
const DefaultRecoveryThreads = 8

// WithRecoveryThreads sets how many logs are opened (and recovered) or
// closed at once (num.recovery.threads.per.data.dir, default
// DefaultRecoveryThreads); values below 1 mean 1.
func WithRecoveryThreads(n int) ManagerOption {
	return func(o *managerOptions) { o.recoveryThreads = n }
}

// WithMaxOpenFiles bounds the segment files (.log, .index, .timeindex) the
// logs keep open at once (millrace.log.max.open.files, default
// DefaultMaxOpenFiles): the least recently used are closed and reopened on
// their next use. 0 means no bound. Files are opened lazily either way.
func WithMaxOpenFiles(n int) ManagerOption {
	return func(o *managerOptions) { o.maxOpenFiles = n }
}

// WithRemoteStorageSystem tells the logs whether the broker has tiered
// storage on (remote.log.storage.system.enable, broker/tier). Without it a
// log whose topic sets remote.storage.enable is retained as an untiered
// one, by retention.ms and retention.bytes (remote.go). Without the option
// the topic's setting is acted on.
func WithRemoteStorageSystem(enabled bool) ManagerOption {
	return func(o *managerOptions) { o.untiered = !enabled }
}

// OpenManager opens every partition log found in dataDir with the default
// config (apply per-topic overrides with Log.SetConfig).
func OpenManager(dataDir string, defaults Config, logger *slog.Logger, opts ...ManagerOption) (*Manager, error) {
	o := managerOpts(opts)
	return openManager(dataDir, defaults, logger, options{files: newFileCache(o.maxOpenFiles), threads: o.recoveryThreads, untiered: o.untiered})
}

func managerOpts(opts []ManagerOption) managerOptions {
	o := managerOptions{maxOpenFiles: DefaultMaxOpenFiles, recoveryThreads: DefaultRecoveryThreads}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

func openManager(dataDir string, defaults Config, logger *slog.Logger, opts options) (*Manager, error) {
	if err := defaults.Validate(); err != nil {
		return nil, err
	}
	if opts.files == nil {
		opts.files = newFileCache(DefaultMaxOpenFiles)
	}
	if opts.decoder == nil {
		// One per broker: its logs share the bound on decompressions at
		// once; another broker or a sink in the same process has its own.
		opts.decoder = recordbatch.NewDecoder(0)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return nil, err
	}
	m := &Manager{dataDir: dataDir, defaults: defaults, logger: logger, opts: opts, logs: map[TopicPartition]*Log{}, producerCfg: DefaultProducerStateConfig(), stop: make(chan struct{})}
	entries, err := os.ReadDir(dataDir)
	if err != nil {
		return nil, err
	}
	var tps []TopicPartition
	for _, e := range entries {
		if tp, ok := parseTopicPartition(e.Name()); e.IsDir() && ok {
			tps = append(tps, tp)
		}
	}
	start := time.Now()
	logs := make([]*Log, len(tps))
	err = inParallel(opts.threads, len(tps), func(i int) error {
		l, err := openLog(filepath.Join(dataDir, tps[i].String()), defaults, m.partitionLogger(tps[i]), opts)
		logs[i] = l
		return err
	})
	for i, l := range logs {
		if l != nil {
			m.logs[tps[i]] = l
		}
	}
	if err != nil {
		m.Close()
		return nil, err
	}
	m.logger.Info("opened logs", "component", "log", "data_dir", dataDir, "partitions", len(m.logs), "took", time.Since(start))
	return m, nil
}

// inParallel runs fn(0..n-1) on up to threads goroutines and returns the
// first error; after an error no further index is started.
func inParallel(threads, n int, fn func(i int) error) error {
	threads = max(1, min(threads, n))
	var (
		mu    sync.Mutex // guards next and first
		next  int
		first error
		wg    sync.WaitGroup
	)
	for range threads {
		wg.Go(func() {
			for {
				mu.Lock()
				i := next
				next++
				stop := first != nil || i >= n
				mu.Unlock()
				if stop {
					return
				}
				if err := fn(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return first
}

func (m *Manager) partitionLogger(tp TopicPartition) *slog.Logger {
	return m.logger.With("topic", tp.Topic, "partition", tp.Partition)
}

// parseTopicPartition splits "<topic>-<partition>" at the last dash.
func parseTopicPartition(name string) (TopicPartition, bool) {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 {
		return TopicPartition{}, false
	}
	p, err := strconv.ParseInt(name[i+1:], 10, 32)
	if err != nil || p < 0 {
		return TopicPartition{}, false
	}
	return TopicPartition{Topic: name[:i], Partition: int32(p)}, true
}

// validTopic reports whether topic is a legal Kafka topic name, which also
// makes it a safe directory name.
func validTopic(topic string) bool {
	if topic == "" || topic == "." || topic == ".." || len(topic) > 249 {
		return false
	}
	for _, c := range topic {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Get returns the log of a partition, if this manager holds it.
func (m *Manager) Get(topic string, partition int32) (*Log, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.logs[TopicPartition{topic, partition}]
	return l, ok
}

// Create opens a new partition log with cfg, or returns the existing one.
func (m *Manager) Create(topic string, partition int32, cfg Config) (*Log, error) {
	if !validTopic(topic) || partition < 0 {
		return nil, fmt.Errorf("log: invalid topic partition %q/%d", topic, partition)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	tp := TopicPartition{topic, partition}
	if l, ok := m.logs[tp]; ok {
		return l, nil
	}
	l, err := openLog(filepath.Join(m.dataDir, tp.String()), cfg, m.partitionLogger(tp), m.opts)
	if err != nil {
		return nil, err
	}
	if err := l.SetProducerStateConfig(m.producerCfg); err != nil {
		return nil, errors.Join(err, l.Close())
	}
	m.logs[tp] = l
	return l, nil
}

// Remove deletes a partition's log and its data.
func (m *Manager) Remove(topic string, partition int32) error {
	tp := TopicPartition{topic, partition}
	m.mu.Lock()
	l, ok := m.logs[tp]
	delete(m.logs, tp)
	m.mu.Unlock()
	if !ok {
		return nil
	}
	return l.Delete()
}

// SetProducerStateConfig sets the producer state bounds of every log, those
// open now and those created later.
func (m *Manager) SetProducerStateConfig(c ProducerStateConfig) error {
	if err := c.Validate(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.producerCfg = c
	for _, l := range m.logs {
		if err := l.SetProducerStateConfig(c); err != nil {
			return err
		}
	}
	return nil
}

// DataDir is the directory holding the partition logs.
func (m *Manager) DataDir() string { return m.dataDir }

// All returns a snapshot of every log.
func (m *Manager) All() map[TopicPartition]*Log {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[TopicPartition]*Log, len(m.logs))
	for tp, l := range m.logs {
		out[tp] = l
	}
	return out
}

// Start runs retention and flush.ms checks every checkInterval (Kafka's
// log.retention.check.interval.ms, DefaultRetentionCheckInterval) until
// Close; each log's own timer already flushes on time, so the flush.ms
// check is a backstop. It also expires idle producers and writes changed
// producer state snapshots every producerSnapshotInterval. Calling it more
// than once has no effect.
func (m *Manager) Start(checkInterval time.Duration) {
	if checkInterval <= 0 {
		checkInterval = DefaultRetentionCheckInterval
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed || m.started {
		return
	}
	m.started = true
	m.wg.Add(1)
	go m.run(checkInterval)
}

func (m *Manager) run(interval time.Duration) {
	defer m.wg.Done()
	t := time.NewTicker(interval)
	defer t.Stop()
	snapshots := time.NewTicker(producerSnapshotInterval)
	defer snapshots.Stop()
	retry := time.NewTicker(WriteRetryInterval)
	defer retry.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-retry.C:
			m.recoverWrites()
		case <-t.C:
			m.checkAll()
		case <-snapshots.C:
			for _, l := range m.All() {
				l.maintainProducers()
			}
		}
	}
}

// SetRetentionBound gives retention each partition's high watermark, which
// an expired active segment waits for before it is deleted
// (EnforceRetentionBelow): bound returns it, or -1 when there is none to
// wait for, or false for a partition whose high watermark is not known
// yet, whose active segment then stays. Call it before Start.
func (m *Manager) SetRetentionBound(bound func(TopicPartition) (int64, bool)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.retentionBound = bound
}

// recoverWrites retries writing to every log that refuses appends after a
// failed write (recover_writes.go), and keeps the set of those still
// refusing for Refusing. A log whose failure only a restart can clear is
// told once.
func (m *Manager) recoverWrites() {
	var refusing map[TopicPartition]bool
	for tp, l := range m.All() {
		if !l.Refusing() {
			continue
		}
		ok, err := l.RecoverWrites()
		if errors.Is(err, ErrNeedsReopen) && !l.toldNeedsReopen.Swap(true) {
			m.logger.Error("partition log refuses appends until the broker restarts", "component", "log", "topic", tp.Topic, "partition", tp.Partition, "err", err)
		}
		if !ok {
			if refusing == nil {
				refusing = map[TopicPartition]bool{}
			}
			refusing[tp] = true
		}
	}
	m.refusing.Store(&refusing)
}

// Refusing is the set of partitions whose log refused appends after a
// failed write at the last retry (every WriteRetryInterval); nil for none.
// The caller must not change it.
func (m *Manager) Refusing() map[TopicPartition]bool {
	if p := m.refusing.Load(); p != nil {
		return *p
	}
	return nil
}

// checkAll runs one round of retention and flush checks.
func (m *Manager) checkAll() {
	now := time.Now()
	if m.opts.now != nil {
		now = m.opts.now()
	}
	m.mu.Lock()
	bound := m.retentionBound
	m.mu.Unlock()
	for tp, l := range m.All() {
		highWatermark := int64(-1)
		if bound != nil {
			hw, ok := bound(tp)
			if !ok {
				hw = 0
			}
			highWatermark = hw
		}
		if _, err := l.EnforceRetentionBelow(now, highWatermark); err != nil && !errors.Is(err, ErrClosed) {
			m.logger.Error("retention failed", "component", "log", "topic", tp.Topic, "partition", tp.Partition, "err", err)
		}
		if err := l.FlushIfDue(now); err != nil && !errors.Is(err, ErrClosed) {
			m.logger.Error("flush failed", "component", "log", "topic", tp.Topic, "partition", tp.Partition, "err", err)
		}
	}
}

// Close stops the background checks and closes every log.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	close(m.stop)
	logs := m.logs
	m.logs = map[TopicPartition]*Log{}
	m.mu.Unlock()
	m.wg.Wait()
	all := make([]*Log, 0, len(logs))
	for _, l := range logs {
		all = append(all, l)
	}
	// Each close fsyncs and writes the clean-shutdown marker: overlap them
	// as the opening does.
	errs := make([]error, len(all))
	inParallel(m.opts.threads, len(all), func(i int) error {
		errs[i] = all[i].Close()
		return nil
	})
	return errors.Join(errs...)
}
