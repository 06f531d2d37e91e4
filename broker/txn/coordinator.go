package txn

import (
	"context"
	"errors"
	"hash/fnv"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"millrace/broker/coord"
)

const (
	// lockStripes is how many mutexes serialise the transactional IDs'
	// read-modify-write cycles; IDs sharing a stripe merely wait for each
	// other.
	lockStripes = 64
	// ownershipCheck is how often the coordinator looks whether its view
	// of the live brokers changed, so it takes over the IDs that came to it
	// without waiting for the next AbortCheckInterval.
	ownershipCheck = 250 * time.Millisecond
	// markerRetryMin and markerRetryMax bound the pause between attempts
	// to write a transaction's markers.
	markerRetryMin = 50 * time.Millisecond
	markerRetryMax = 2 * time.Second
	// markerAttemptTimeout bounds one attempt to write the markers.
	markerAttemptTimeout = 30 * time.Second
)

// Coordinator coordinates the transactions of the transactional IDs this
// broker owns.
type Coordinator struct {
	cfg   Config
	store coord.Store
	log   *slog.Logger
	now   func() time.Time

	stripes [lockStripes]sync.Mutex

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // the background loop and marker writers

	index idIndex // the IDs this broker coordinates, for MaxIDs (limits.go)

	mu         sync.Mutex          // guards the following
	completing map[string]struct{} // IDs whose markers a goroutine is writing
	closed     bool
}

// New builds a coordinator; Start starts its background work.
func New(store coord.Store, cfg Config, logger *slog.Logger) (*Coordinator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.NewProducerID == nil || cfg.Markers == nil {
		return nil, errors.New("the transaction coordinator needs a producer ID allocator and a marker writer")
	}
	if store == nil {
		return nil, errors.New("the transaction coordinator needs a coordination store")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	if err := ensureRoot(store); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Coordinator{cfg: cfg, store: store, log: logger.With("component", "txn"), now: now,
		ctx: ctx, cancel: cancel, completing: make(map[string]struct{}), index: newIDIndex()}, nil
}

// Start runs the background work: a first pass over the stored
// transactions at once (IDs taken over at startup), then one every
// AbortCheckInterval and whenever ownership may have changed.
func (c *Coordinator) Start() {
	c.wg.Add(1)
	go c.loop()
}

// Close stops the background work and waits for it. Markers being written
// are abandoned; the ID's next coordinator (this broker after a restart,
// or another) finishes them.
func (c *Coordinator) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
	return nil
}

// owns reports whether this broker coordinates id now.
func (c *Coordinator) owns(id string) bool {
	if c.cfg.Owner == nil {
		return true
	}
	owned, _ := c.cfg.Owner(id)
	return owned
}

// Coordinates reports whether this broker coordinates transactional ID id.
func (c *Coordinator) Coordinates(id string) bool { return c.owns(id) }

// lock serialises the state changes of id.
func (c *Coordinator) lock(id string) *sync.Mutex {
	h := fnv.New32a()
	h.Write([]byte(id))
	m := &c.stripes[h.Sum32()%lockStripes]
	m.Lock()
	return m
}

func (c *Coordinator) nowMs() int64 { return c.now().UnixMilli() }

// storeCode maps a store failure to the answer a client retries on:
// a lost compare-and-set means another broker coordinates the ID.
func (c *Coordinator) storeCode(id string, err error) int16 {
	if errors.Is(err, errConflict) {
		return kerr.NotCoordinator.Code
	}
	c.log.Error("transaction state in the store", "transactional_id", id, "err", err)
	return kerr.CoordinatorNotAvailable.Code
}

// InitProducer is InitProducerId for transactional ID id, asked by
// principal: the producer ID and epoch the producer is to use, fencing any
// earlier producer with the same ID. expected is the producer ID and epoch
// a v3+ request names (ID -1 when none). An ID new to the store counts
// against MaxIDs and MaxIDsPerPrincipal (POLICY_VIOLATION past them;
// COORDINATOR_LOAD_IN_PROGRESS until the first pass counted the stored
// IDs).
func (c *Coordinator) InitProducer(principal, id string, timeout time.Duration, expected ProducerIDAndEpoch) (ProducerIDAndEpoch, int16) {
	none := ProducerIDAndEpoch{ID: noProducerID, Epoch: noEpoch}
	if !c.owns(id) {
		return none, kerr.NotCoordinator.Code
	}
	if timeout <= 0 || timeout > c.cfg.MaxTimeout {
		return none, kerr.InvalidTransactionTimeout.Code
	}
	gen := c.generation()
	c.index.waitReady(c.ctx, gen, indexWait)
	defer c.lock(id).Unlock()
	m, version, found, err := load(c.store, id)
	if err != nil {
		return none, c.storeCode(id, err)
	}
	timeoutMs := int32(timeout.Milliseconds())
	if !found {
		if code, logRefusal := c.index.reserve(id, principal, gen, c.cfg.MaxIDs, c.cfg.MaxIDsPerPrincipal); code != 0 {
			if logRefusal {
				c.log.Warn("refusing new transactional IDs: millrace.max.transactional.ids or .per.principal reached",
					"principal", principal, "max_ids", c.cfg.MaxIDs, "max_ids_per_principal", c.cfg.MaxIDsPerPrincipal)
			}
			return none, code
		}
		pid, err := c.cfg.NewProducerID()
		if err != nil {
			c.index.release(id)
			c.log.Error("allocating a producer ID", "transactional_id", id, "err", err)
			return none, kerr.CoordinatorNotAvailable.Code
		}
		m = newMetadata(id, principal, pid, timeoutMs, c.nowMs())
		if _, err := save(c.store, m, -1); err != nil {
			c.index.release(id)
			return none, c.storeCode(id, err)
		}
		return ProducerIDAndEpoch{ID: m.ProducerID, Epoch: m.ProducerEpoch}, 0
	}
	next, write, abort, code, err := initProducer(m, expected, timeoutMs, c.nowMs(), c.cfg.NewProducerID)
	if err != nil {
		c.log.Error("allocating a producer ID", "transactional_id", id, "err", err)
		return none, kerr.CoordinatorNotAvailable.Code
	}
	if write {
		if _, err = save(c.store, next, version); err != nil {
			return none, c.storeCode(id, err)
		}
	}
	if abort {
		c.log.Info("a new producer fences the transaction in progress; aborting it", "transactional_id", id, "producer_id", next.ProducerID, "producer_epoch", next.ProducerEpoch)
	}
	if next.State.prepared() {
		c.completeAsync(id)
	}
	if code != 0 {
		return none, code
	}
	return ProducerIDAndEpoch{ID: next.ProducerID, Epoch: next.ProducerEpoch}, 0
}

// check answers the state of id for a request that needs an existing,
// owned ID.
func (c *Coordinator) check(id string) int16 {
	if !c.owns(id) {
		return kerr.NotCoordinator.Code
	}
	return 0
}

// AddPartitions adds partitions to the producer's transaction, starting it
// if none is in progress.
func (c *Coordinator) AddPartitions(id string, p ProducerIDAndEpoch, partitions map[string][]int32) int16 {
	return c.add(id, p, partitions, nil)
}

// AddGroup adds a consumer group's offsets to the producer's transaction
// (AddOffsetsToTxn).
func (c *Coordinator) AddGroup(id string, p ProducerIDAndEpoch, group string) int16 {
	return c.add(id, p, nil, []string{group})
}

func (c *Coordinator) add(id string, p ProducerIDAndEpoch, partitions map[string][]int32, groups []string) int16 {
	if code := c.check(id); code != 0 {
		return code
	}
	defer c.lock(id).Unlock()
	m, version, code := c.loadForProducer(id)
	if code != 0 {
		return code
	}
	next, write, code := addToTransaction(m, p, partitions, groups, c.nowMs())
	if write {
		if _, err := save(c.store, next, version); err != nil {
			return c.storeCode(id, err)
		}
	}
	return code
}

// loadForProducer reads id's state for a request of its producer: an ID
// without state is INVALID_PRODUCER_ID_MAPPING (the producer has not called
// InitProducerId here).
func (c *Coordinator) loadForProducer(id string) (Metadata, int32, int16) {
	m, version, found, err := load(c.store, id)
	if err != nil {
		return Metadata{}, -1, c.storeCode(id, err)
	}
	if !found {
		return Metadata{}, -1, kerr.InvalidProducerIDMapping.Code
	}
	return m, version, 0
}

// VerifyPartitions answers, for each partition, whether the producer's
// ongoing transaction holds it (AddPartitionsToTxn v4+ verify_only,
// KIP-890): 0 when it does, INVALID_TXN_STATE when not, the producer's or
// coordinator's error otherwise.
func (c *Coordinator) VerifyPartitions(id string, p ProducerIDAndEpoch, partitions map[string][]int32) (map[string]map[int32]int16, int16) {
	if code := c.check(id); code != 0 {
		return nil, code
	}
	m, _, code := c.loadForProducer(id)
	if code != 0 {
		return nil, code
	}
	if code := checkProducer(m, p); code != 0 {
		return nil, code
	}
	out := make(map[string]map[int32]int16, len(partitions))
	for t, ps := range partitions {
		out[t] = make(map[int32]int16, len(ps))
		for _, pt := range ps {
			code := kerr.InvalidTxnState.Code
			if m.State == Ongoing && slices.Contains(m.Partitions[t], pt) {
				code = 0
			}
			out[t][pt] = code
		}
	}
	return out, 0
}

// EndTransaction commits or aborts the producer's transaction: the decision
// is written to the store before the answer, and the markers follow in the
// background (a request meanwhile gets CONCURRENT_TRANSACTIONS).
func (c *Coordinator) EndTransaction(id string, p ProducerIDAndEpoch, commit bool) int16 {
	if code := c.check(id); code != 0 {
		return code
	}
	defer c.lock(id).Unlock()
	m, version, code := c.loadForProducer(id)
	if code != 0 {
		return code
	}
	next, write, code := endTransaction(m, p, commit, c.nowMs())
	if write {
		if _, err := save(c.store, next, version); err != nil {
			return c.storeCode(id, err)
		}
		c.completeAsync(id)
	}
	return code
}

// completeAsync writes the markers of id's decided transaction in the
// background, unless a goroutine already is.
func (c *Coordinator) completeAsync(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	if _, busy := c.completing[id]; busy {
		return
	}
	c.completing[id] = struct{}{}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer func() {
			c.mu.Lock()
			delete(c.completing, id)
			c.mu.Unlock()
		}()
		c.complete(id)
	}()
}

// complete writes the markers of id's decided transaction until they are
// all written, then records it complete. It gives up when the ID moves to
// another broker (which carries on from the store) or the coordinator
// closes.
func (c *Coordinator) complete(id string) {
	pause := markerRetryMin
	for attempt := 0; ; attempt++ {
		if c.ctx.Err() != nil || !c.owns(id) {
			return
		}
		m, version, found, err := load(c.store, id)
		if err != nil {
			c.log.Warn("reading a decided transaction", "transactional_id", id, "err", err)
		} else if !found || !m.State.prepared() {
			return
		} else {
			err = c.writeMarkers(m, version)
			if err == nil {
				err = c.finish(id, version)
				if err == nil || errors.Is(err, errConflict) {
					return
				}
			}
			level := slog.LevelDebug
			if attempt >= 10 {
				level = slog.LevelWarn
			}
			c.log.Log(c.ctx, level, "writing transaction markers", "transactional_id", id, "commit", m.State == PrepareCommit, "attempt", attempt+1, "err", err)
		}
		t := time.NewTimer(pause)
		select {
		case <-c.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		pause = min(2*pause, markerRetryMax)
	}
}

// writeMarkers writes the markers of decided transaction m, stored at
// version.
func (c *Coordinator) writeMarkers(m Metadata, version int32) error {
	if len(m.Partitions) == 0 && len(m.Groups) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(c.ctx, markerAttemptTimeout)
	defer cancel()
	return c.cfg.Markers.WriteMarkers(ctx, Markers{
		TransactionalID: m.TransactionalID, ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch,
		Commit: m.State == PrepareCommit, CoordinatorEpoch: version,
		Partitions: m.Partitions, Groups: m.Groups,
	})
}

// finish records id's transaction complete, if its node is still at
// version.
func (c *Coordinator) finish(id string, version int32) error {
	defer c.lock(id).Unlock()
	m, current, found, err := load(c.store, id)
	if err != nil {
		return err
	}
	if !found || current != version {
		return errConflict
	}
	_, err = save(c.store, complete(m, c.nowMs()), version)
	return err
}
