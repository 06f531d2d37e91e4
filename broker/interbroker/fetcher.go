package interbroker

// The follower's half of replication (Kafka's replica fetcher threads): one
// fetcher per leader broker copies every partition this broker follows
// from that leader, in one Fetch request per round, on the pooled client to
// that broker. Each partition is first truncated by leader epoch
// (OffsetForLeaderEpoch, replica.TruncationFor; KIP-101 and KIP-279), then
// fetched with long-polling Fetch requests carrying this broker's ID as
// replica ID, appending whole batches verbatim (log.AppendReplicated keeps
// their offsets and epochs). The leader counts each fetch offset as this
// replica's log end offset.
//
// Appends and truncations happen under the partition's producer-state lock,
// and keep that state exact (applied batch by batch, rebuilt after a
// truncation), so a snapshot never describes a different log.
//
// A fetch below a tiered leader's local log start restarts the log there
// from remote storage (tiered.go). An error on one partition (the leader
// not ready at the new epoch, an offset out of range, a refused append)
// pauses that partition and sends it back to truncation; an error of the whole request (the connection, the
// leader gone) does so for every partition, as a reconnect did when each
// partition had its own connection.
//
// Versions are fixed and non-flexible (Fetch v11, OffsetForLeaderEpoch v3,
// pinnedVersions): both carry the replica ID and the current leader epoch,
// and both sides are millrace.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/replica"
	"millrace/broker/replication"
)

const (
	fetchKey                    = 1
	fetchVersion                = 11
	offsetForLeaderEpochKey     = 23
	offsetForLeaderEpochVersion = 3

	// followerFetchWait is the follower's Fetch max wait: the leader answers
	// as soon as there is data, so this only bounds an idle poll.
	followerFetchWait = 500 * time.Millisecond
	// followerFetchBytes bounds one fetch's records, per partition and in
	// all.
	followerFetchBytes = 8 << 20
	// followerBackoff is the pause after an error before trying again.
	followerBackoff = 100 * time.Millisecond
)

// Fetchers is the broker's replication.Follower: one fetcher per leader.
type Fetchers struct {
	client   *Client
	brokerID int32
	logger   *slog.Logger

	wg sync.WaitGroup // the fetchers' goroutines
	// quota is follower.replication.throttled.rate (throttle.go); nil:
	// none. Set before the first Follow.
	quota ReplicationQuota
	// rebuild restarts a tiered partition's log from remote storage
	// (tiered.go); nil: tiered storage is off. Set before the first Follow.
	rebuild RemoteRebuild

	mu      sync.Mutex // guards the following
	leaders map[int32]*leaderFetcher
}

// Fetchers returns the replica fetchers that use this client.
func (c *Client) Fetchers() *Fetchers {
	return &Fetchers{client: c, brokerID: c.cfg.BrokerID, logger: c.logger.With("component", "replication"), leaders: map[int32]*leaderFetcher{}}
}

// Follow adds p to the fetcher of its leader, starting that fetcher if it
// is the first partition followed from there. stop removes it and returns
// once nothing more will be truncated, appended or published for it; the
// fetcher ends with its last partition.
func (fs *Fetchers) Follow(p *replication.Followed) (stop func()) {
	fp := &fetchedPartition{p: p}
	fs.mu.Lock()
	lf := fs.leaders[p.Leader]
	if lf == nil {
		lf = &leaderFetcher{fs: fs, leader: p.Leader, stopping: make(chan struct{}), kick: make(chan struct{}, 1), partitions: map[*fetchedPartition]struct{}{}}
		fs.leaders[p.Leader] = lf
		fs.wg.Add(1)
		go lf.run()
	}
	lf.add(fp)
	fs.mu.Unlock()
	return func() { fs.remove(lf, fp) }
}

// remove stops fetching fp; the last partition stops its fetcher.
func (fs *Fetchers) remove(lf *leaderFetcher, fp *fetchedPartition) {
	fp.mu.Lock()
	fp.removed = true
	fp.mu.Unlock()
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if lf.remove(fp) == 0 {
		delete(fs.leaders, lf.leader)
		close(lf.stopping)
		lf.interrupt()
	}
}

// Close waits for the fetchers to end; every partition must have been
// stopped first (the replica manager's Close does that).
func (fs *Fetchers) Close() error {
	fs.wg.Wait()
	return nil
}

// fetchedPartition is one partition a leader fetcher copies.
type fetchedPartition struct {
	p *replication.Followed

	mu      sync.Mutex // guards removed, and is held for every write to the log
	removed bool

	// Owned by the fetcher's goroutine.
	truncated bool      // truncated by leader epoch since the last error
	retryAt   time.Time // paused until then after an error
	// leaderHighWatermark is the high watermark the leader last sent:
	// a log end behind it is not caught up (throttle.go).
	leaderHighWatermark int64
}

// leaderFetcher copies the partitions followed from one leader.
type leaderFetcher struct {
	fs       *Fetchers
	leader   int32
	stopping chan struct{} // closed by Fetchers.remove, under Fetchers.mu
	kick     chan struct{} // room for one signal: the partition set changed

	mu         sync.Mutex // guards the following
	partitions map[*fetchedPartition]struct{}
	cancel     context.CancelFunc // of the request in flight, if any
}

// add adds fp and interrupts the fetch in flight, so fp is fetched from
// the next round rather than after the long poll.
func (lf *leaderFetcher) add(fp *fetchedPartition) {
	lf.mu.Lock()
	lf.partitions[fp] = struct{}{}
	lf.mu.Unlock()
	lf.interrupt()
	lf.fs.logger.Info("following", "topic", fp.p.Topic, "partition", fp.p.Partition, "leader", fp.p.Leader, "leader_epoch", fp.p.Epoch)
}

// remove removes fp and returns how many partitions are left.
func (lf *leaderFetcher) remove(fp *fetchedPartition) int {
	lf.mu.Lock()
	defer lf.mu.Unlock()
	delete(lf.partitions, fp)
	return len(lf.partitions)
}

// interrupt cancels the request in flight and wakes a pause.
func (lf *leaderFetcher) interrupt() {
	lf.mu.Lock()
	if lf.cancel != nil {
		lf.cancel()
	}
	lf.mu.Unlock()
	select {
	case lf.kick <- struct{}{}:
	default:
	}
}

func (lf *leaderFetcher) stopped() bool {
	select {
	case <-lf.stopping:
		return true
	default:
		return false
	}
}

// pause waits d, or less when stopped or the partition set changes.
func (lf *leaderFetcher) pause(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-lf.stopping:
	case <-lf.kick:
	case <-t.C:
	}
}

// snapshot lists the partitions, and a context for one request that a
// change of the set or stopping cancels.
func (lf *leaderFetcher) snapshot() ([]*fetchedPartition, context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	lf.mu.Lock()
	defer lf.mu.Unlock()
	parts := make([]*fetchedPartition, 0, len(lf.partitions))
	for fp := range lf.partitions {
		parts = append(parts, fp)
	}
	lf.cancel = cancel
	return parts, ctx, cancel
}

func (lf *leaderFetcher) run() {
	defer lf.fs.wg.Done()
	for !lf.stopped() {
		select {
		case <-lf.kick: // consumed: this round sees the change
		default:
		}
		parts, ctx, cancel := lf.snapshot()
		wait := lf.round(ctx, parts)
		cancel()
		if wait > 0 {
			lf.pause(wait)
		}
	}
}

// round truncates the partitions that need it, then fetches the others
// once. It returns how long to pause before the next round (0 for none).
func (lf *leaderFetcher) round(ctx context.Context, parts []*fetchedPartition) time.Duration {
	now := time.Now()
	var ready []*fetchedPartition
	wait := followerFetchWait
	for _, fp := range parts {
		if now.Before(fp.retryAt) {
			wait = min(wait, fp.retryAt.Sub(now))
			continue
		}
		if !fp.truncated {
			if err := lf.truncate(ctx, fp); err != nil {
				lf.failed(fp, "truncating by leader epoch", err)
				wait = min(wait, followerBackoff)
				continue
			}
			fp.truncated = true
		}
		ready = append(ready, fp)
	}
	if len(ready) > 0 {
		// Held by follower.replication.throttled.rate: fetched again
		// once the next round finds the quota refilled.
		if ready = lf.unthrottled(ready, now); len(ready) == 0 {
			wait = min(wait, followerBackoff)
		}
	}
	if len(ready) == 0 || ctx.Err() != nil {
		return wait
	}
	// A paused partition's retry is not held up by the others' long poll.
	if err := lf.fetch(ctx, ready, wait); err != nil {
		if ctx.Err() != nil {
			return 0 // interrupted: the set changed or the fetcher stops
		}
		for _, fp := range ready {
			lf.failed(fp, "fetching from the leader", err)
		}
		return followerBackoff
	}
	return 0
}

// failed logs a partition's error and pauses it, back to truncation.
func (lf *leaderFetcher) failed(fp *fetchedPartition, what string, err error) {
	fp.truncated = false
	fp.retryAt = time.Now().Add(followerBackoff)
	if lf.stopped() || errors.Is(err, context.Canceled) {
		return
	}
	lf.fs.logger.Log(context.Background(), followerLogLevel(err), what, "topic", fp.p.Topic, "partition", fp.p.Partition, "leader", lf.leader, "err", err)
}

// errRetry is a leader answer worth retrying after a pause (the leader has
// not caught up with the new epoch yet, or is moving).
var errRetry = errors.New("leader not ready")

// errReplicaDenied is the leader's authorizer refusing this broker
// ClusterAction: nothing replicates until an operator grants it, so it is
// logged at Warn rather than with the passing errors.
var errReplicaDenied = errors.New("the leader refuses this broker's replica requests: its principal needs ClusterAction on the cluster or a place in super.users")

// followerLogLevel is Debug for the passing errors of following, Warn for
// a refusal only an operator can end.
func followerLogLevel(err error) slog.Level {
	if errors.Is(err, errReplicaDenied) {
		return slog.LevelWarn
	}
	return slog.LevelDebug
}

// truncate cuts fp's log where its history departs from the leader's.
func (lf *leaderFetcher) truncate(ctx context.Context, fp *fetchedPartition) error {
	l := fp.p.Log
	answer := replica.EpochEndOffset{LeaderEpoch: replica.UndefinedEpoch, EndOffset: replica.UndefinedEpochOffset}
	ask := replica.RequestEpoch(l)
	var cut replica.Truncation
	for round := 0; ; round++ {
		if ask != replica.UndefinedEpoch {
			var err error
			if answer, err = lf.offsetForLeaderEpoch(ctx, fp, ask); err != nil {
				return err
			}
		}
		cut = replica.TruncationFor(l, fp.p.HighWatermark(), answer)
		if !cut.AskAgain {
			break
		}
		if round > 1000 {
			return errors.New("OffsetForLeaderEpoch did not converge")
		}
		ask = cut.Epoch
	}
	if cut.Offset >= l.EndOffset() {
		return nil
	}
	fp.mu.Lock()
	defer fp.mu.Unlock()
	if fp.removed {
		return context.Canceled
	}
	from := l.EndOffset()
	// The log rebuilds its producer state as it truncates.
	if err := l.TruncateTo(cut.Offset); err != nil {
		return fmt.Errorf("truncating to %d: %w", cut.Offset, err)
	}
	lf.fs.logger.Info("truncated the log by leader epoch", "topic", fp.p.Topic, "partition", fp.p.Partition,
		"from", from, "to", l.EndOffset(), "leader", lf.leader, "leader_epoch", fp.p.Epoch)
	return nil
}

// offsetForLeaderEpoch asks the leader where epoch ends.
func (lf *leaderFetcher) offsetForLeaderEpoch(ctx context.Context, fp *fetchedPartition, epoch int32) (replica.EpochEndOffset, error) {
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.Version = offsetForLeaderEpochVersion
	req.ReplicaID = lf.fs.brokerID
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = fp.p.Topic
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = fp.p.Partition, fp.p.Epoch, epoch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	raw, err := lf.fs.client.Request(ctx, lf.leader, req)
	if err != nil {
		return replica.EpochEndOffset{}, err
	}
	resp := raw.(*kmsg.OffsetForLeaderEpochResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return replica.EpochEndOffset{}, errors.New("malformed OffsetForLeaderEpoch response")
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode == kerr.TopicAuthorizationFailed.Code {
		return replica.EpochEndOffset{}, errReplicaDenied
	}
	if p.ErrorCode != 0 {
		return replica.EpochEndOffset{}, fmt.Errorf("%w: OffsetForLeaderEpoch: %v", errRetry, kerr.ErrorForCode(p.ErrorCode))
	}
	return replica.EpochEndOffset{LeaderEpoch: p.LeaderEpoch, EndOffset: p.EndOffset}, nil
}

// fetch sends one Fetch for parts, waiting at most maxWait at the leader,
// and applies each partition's answer. An error of the whole request is
// returned; a partition's own error pauses that partition alone.
func (lf *leaderFetcher) fetch(ctx context.Context, parts []*fetchedPartition, maxWait time.Duration) error {
	req := kmsg.NewPtrFetchRequest()
	req.Version = fetchVersion
	req.ReplicaID = lf.fs.brokerID
	req.MaxWaitMillis = int32(maxWait / time.Millisecond)
	req.MinBytes = 1
	req.MaxBytes = followerFetchBytes
	req.SessionEpoch = -1
	type key struct {
		topic     string
		partition int32
	}
	byKey := make(map[key]*fetchedPartition, len(parts))
	now := time.Now()
	topics := map[string]int{} // index in req.Topics
	for _, fp := range parts {
		i, ok := topics[fp.p.Topic]
		if !ok {
			i = len(req.Topics)
			topics[fp.p.Topic] = i
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = fp.p.Topic
			req.Topics = append(req.Topics, rt)
		}
		p := kmsg.NewFetchRequestTopicPartition()
		p.Partition = fp.p.Partition
		p.CurrentLeaderEpoch = fp.p.Epoch
		p.FetchOffset = fp.p.Log.EndOffset()
		p.LogStartOffset = fp.p.Log.StartOffset()
		p.PartitionMaxBytes = lf.partitionMaxBytes(fp, now)
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, p)
		byKey[key{fp.p.Topic, fp.p.Partition}] = fp
	}
	ctx, cancel := context.WithTimeout(ctx, followerFetchWait+10*time.Second)
	defer cancel()
	raw, err := lf.fs.client.Request(ctx, lf.leader, req)
	if err != nil {
		return err
	}
	resp := raw.(*kmsg.FetchResponse)
	if resp.ErrorCode != 0 {
		return fmt.Errorf("fetch: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	for _, rt := range resp.Topics {
		for i := range rt.Partitions {
			sp := &rt.Partitions[i]
			if fp := byKey[key{rt.Topic, sp.Partition}]; fp != nil {
				if err := lf.apply(ctx, fp, sp); err != nil {
					lf.failed(fp, "fetching from the leader", err)
				}
			}
		}
	}
	return nil
}

// apply appends one partition's fetched batches and publishes the leader's
// high watermark, unless the partition was removed meanwhile.
func (lf *leaderFetcher) apply(ctx context.Context, fp *fetchedPartition, sp *kmsg.FetchResponseTopicPartition) error {
	if movedToRemote(fp, sp) {
		return lf.rebuildFromRemote(ctx, fp, sp.LogStartOffset)
	}
	switch sp.ErrorCode {
	case 0:
	case kerr.OffsetOutOfRange.Code:
		return fmt.Errorf("fetch at %d: %v", fp.p.Log.EndOffset(), kerr.ErrorForCode(sp.ErrorCode))
	case kerr.TopicAuthorizationFailed.Code:
		return errReplicaDenied
	default:
		return fmt.Errorf("%w: fetch: %v", errRetry, kerr.ErrorForCode(sp.ErrorCode))
	}
	fp.mu.Lock()
	defer fp.mu.Unlock()
	if fp.removed {
		return nil
	}
	l := fp.p.Log
	if len(sp.RecordBatches) > 0 {
		throttled := lf.throttled(fp)
		if _, err := l.AppendReplicated(sp.RecordBatches); err != nil {
			return fmt.Errorf("appending replicated batches: %w", err)
		}
		if throttled {
			lf.fs.quota.Record(int64(len(sp.RecordBatches)), time.Now())
		}
		// With millrace.flush.on.ack the next fetch offset, which the
		// leader counts as this replica's log end for the high
		// watermark and acks=all, must be fsynced here, as Redpanda
		// has every replica fsync before the high watermark moves.
		if l.Config().FlushOnAck {
			if err := l.SyncTo(context.Background(), l.EndOffset()); err != nil {
				return fmt.Errorf("fsync of replicated batches: %w", err)
			}
		}
	}
	// Consumers the leader sent here read below this (KIP-392): the
	// partition wakes their long polls when it moves.
	fp.leaderHighWatermark = sp.HighWatermark
	fp.p.SetHighWatermark(replica.FollowerHighWatermark(sp.HighWatermark, l.EndOffset()))
	return nil
}
