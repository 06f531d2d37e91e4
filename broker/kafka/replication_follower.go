package kafka

// The follower's half of replication: one fetcher goroutine per followed
// partition, on its own connection to the leader. It first truncates the
// log by leader epoch (OffsetForLeaderEpoch, replica.TruncationFor; KIP-101
// and KIP-279), then copies the leader's log with long-polling Fetch
// requests that carry this broker's ID as replica ID, appending whole
// batches verbatim (log.AppendReplicated keeps their offsets and epochs).
// The leader counts each fetch offset as this replica's log end offset.
//
// Appends and truncations happen under the partition's producer-state lock,
// and keep that state exact (applied batch by batch, rebuilt after a
// truncation), so a snapshot never describes a different log.
//
// Versions are fixed and non-flexible (Fetch v11, OffsetForLeaderEpoch v3):
// both carry the replica ID and the current leader epoch, and both sides are
// millrace.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"millrace/broker/replica"
	"millrace/broker/replication"
)

const (
	// followerFetchWait is the follower's Fetch max wait: the leader answers
	// as soon as there is data, so this only bounds an idle poll.
	followerFetchWait = 500 * time.Millisecond
	// followerFetchBytes bounds one fetch's records.
	followerFetchBytes = 8 << 20
	// followerBackoff is the pause after an error before trying again.
	followerBackoff = 100 * time.Millisecond
	// maxReplicaResponse bounds a response frame from the leader.
	maxReplicaResponse = 64 << 20
)

// replicaFetchers is the broker's replication.Follower: one fetcher per
// followed partition.
type replicaFetchers struct{ b *Broker }

// Follow starts a fetcher for p; stop returns once it has ended.
func (r replicaFetchers) Follow(p *replication.Followed) (stop func()) {
	f := &fetcher{b: r.b, p: p, logger: r.b.logger.With("component", "replication"), stopping: make(chan struct{}), done: make(chan struct{})}
	go f.run()
	return f.stop
}

// fetcher copies one partition from its leader at one leader epoch.
type fetcher struct {
	b      *Broker
	p      *replication.Followed
	logger *slog.Logger

	stopping chan struct{}
	done     chan struct{}

	mu   sync.Mutex // guards the following
	conn net.Conn
}

// stop stops the fetcher and waits for it, so that nothing appends once
// it returns.
func (f *fetcher) stop() {
	close(f.stopping)
	f.mu.Lock()
	if f.conn != nil {
		f.conn.Close() // unblocks a waiting fetch
	}
	f.mu.Unlock()
	<-f.done
}

func (f *fetcher) stopped() bool {
	select {
	case <-f.stopping:
		return true
	default:
		return false
	}
}

func (f *fetcher) pause(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-f.stopping:
	case <-t.C:
	}
}

func (f *fetcher) run() {
	defer close(f.done)
	defer f.closeConn()
	tp, leader := f.p.TopicPartition, f.p.Leader
	for !f.stopped() {
		c, err := f.connect()
		if err != nil {
			f.logger.Debug("connecting to the leader", "topic", tp.Topic, "partition", tp.Partition, "leader", leader, "err", err)
			f.pause(followerBackoff)
			continue
		}
		if err := f.truncate(c); err != nil {
			if !f.stopped() {
				f.logger.Log(context.Background(), followerLogLevel(err), "truncating by leader epoch", "topic", tp.Topic, "partition", tp.Partition, "leader", leader, "err", err)
			}
			f.closeConn()
			f.pause(followerBackoff)
			continue
		}
		err = f.fetchLoop(c)
		f.closeConn()
		if !f.stopped() && err != nil {
			f.logger.Log(context.Background(), followerLogLevel(err), "fetching from the leader", "topic", tp.Topic, "partition", tp.Partition, "leader", leader, "err", err)
			f.pause(followerBackoff)
		}
	}
}

// connect dials the leader's inter-broker listener, with TLS when that
// listener is SSL or SASL_SSL, and authenticates when it is SASL.
func (f *fetcher) connect() (*replicaConn, error) {
	b := f.b
	info, ok := b.cluster.Broker(f.p.Leader)
	if !ok {
		return nil, fmt.Errorf("leader %d is not registered", f.p.Leader)
	}
	endpoint, ok := info.Endpoint(b.interBroker)
	if !ok {
		return nil, fmt.Errorf("leader %d has no listener %s (inter.broker.listener.name)", f.p.Leader, b.interBroker)
	}
	protocol := securityProtocol(endpoint.SecurityProtocol)
	conn, err := b.dialBroker(endpoint.Host, endpoint.Port, protocol, 3*time.Second)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	if f.stopped() {
		f.mu.Unlock()
		conn.Close()
		return nil, errors.New("stopped")
	}
	f.conn = conn
	f.mu.Unlock()
	c := &replicaConn{conn: conn, formatter: kmsg.NewRequestFormatter(kmsg.FormatterClientID("millrace-replica-" + strconv.Itoa(int(b.cfg.BrokerID))))}
	// The one place a replication connection authenticates, before its
	// first request.
	if err := f.authenticate(c, protocol); err != nil {
		f.closeConn()
		return nil, fmt.Errorf("authenticating to leader %d: %w", f.p.Leader, err)
	}
	return c, nil
}

// authenticate runs SASL on a new replication connection when the leader's
// inter-broker listener requires it.
func (f *fetcher) authenticate(c *replicaConn, protocol securityProtocol) error {
	if !protocol.usesSASL() {
		return nil
	}
	return f.b.authenticateReplica(c) // sasl_client.go
}

func (f *fetcher) closeConn() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conn != nil {
		f.conn.Close()
		f.conn = nil
	}
}

// errRetry is a leader answer worth retrying after a pause (the leader has
// not caught up with the new epoch yet, or is moving).
var errRetry = errors.New("leader not ready")

// errReplicaDenied is the leader's authorizer refusing this broker
// ClusterAction (authorize.go): nothing replicates until an operator grants
// it, so it is logged at Warn rather than with the passing errors.
var errReplicaDenied = errors.New("the leader refuses this broker's replica requests: its principal needs ClusterAction on the cluster or a place in super.users")

// followerLogLevel is Debug for the passing errors of following, Warn for
// a refusal only an operator can end.
func followerLogLevel(err error) slog.Level {
	if errors.Is(err, errReplicaDenied) {
		return slog.LevelWarn
	}
	return slog.LevelDebug
}

// truncate cuts the log where its history departs from the leader's.
func (f *fetcher) truncate(c *replicaConn) error {
	l := f.p.Log
	answer := replica.EpochEndOffset{LeaderEpoch: replica.UndefinedEpoch, EndOffset: replica.UndefinedEpochOffset}
	ask := replica.RequestEpoch(l)
	var cut replica.Truncation
	for round := 0; ; round++ {
		if ask != replica.UndefinedEpoch {
			var err error
			if answer, err = f.offsetForLeaderEpoch(c, ask); err != nil {
				return err
			}
		}
		cut = replica.TruncationFor(l, f.p.HighWatermark(), answer)
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
	from := l.EndOffset()
	// The log rebuilds its producer state as it truncates.
	if err := l.TruncateTo(cut.Offset); err != nil {
		return fmt.Errorf("truncating to %d: %w", cut.Offset, err)
	}
	f.logger.Info("truncated the log by leader epoch", "topic", f.p.Topic, "partition", f.p.Partition,
		"from", from, "to", l.EndOffset(), "leader", f.p.Leader, "leader_epoch", f.p.Epoch)
	return nil
}

// offsetForLeaderEpoch asks the leader where epoch ends.
func (f *fetcher) offsetForLeaderEpoch(c *replicaConn, epoch int32) (replica.EpochEndOffset, error) {
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.Version = 3
	req.ReplicaID = f.b.cfg.BrokerID
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = f.p.Topic
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = f.p.Partition, f.p.Epoch, epoch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := kmsg.NewPtrOffsetForLeaderEpochResponse()
	if err := c.do(req, resp, 10*time.Second); err != nil {
		return replica.EpochEndOffset{}, err
	}
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

// fetchLoop fetches and appends until an error or stop. An
// OFFSET_OUT_OF_RANGE answer returns so that truncation runs again.
func (f *fetcher) fetchLoop(c *replicaConn) error {
	l := f.p.Log
	me := f.b.cfg.BrokerID
	for !f.stopped() {
		req := kmsg.NewPtrFetchRequest()
		req.Version = 11
		req.ReplicaID = me
		req.MaxWaitMillis = int32(followerFetchWait / time.Millisecond)
		req.MinBytes = 1
		req.MaxBytes = followerFetchBytes
		req.SessionEpoch = -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = f.p.Topic
		p := kmsg.NewFetchRequestTopicPartition()
		p.Partition = f.p.Partition
		p.CurrentLeaderEpoch = f.p.Epoch
		p.FetchOffset = l.EndOffset()
		p.LogStartOffset = l.StartOffset()
		p.PartitionMaxBytes = followerFetchBytes
		rt.Partitions = append(rt.Partitions, p)
		req.Topics = append(req.Topics, rt)
		resp := kmsg.NewPtrFetchResponse()
		if err := c.do(req, resp, followerFetchWait+10*time.Second); err != nil {
			return err
		}
		if resp.ErrorCode != 0 {
			return fmt.Errorf("fetch: %v", kerr.ErrorForCode(resp.ErrorCode))
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return errors.New("malformed fetch response")
		}
		sp := resp.Topics[0].Partitions[0]
		switch sp.ErrorCode {
		case 0:
		case kerr.OffsetOutOfRange.Code:
			return fmt.Errorf("fetch at %d: %v", p.FetchOffset, kerr.ErrorForCode(sp.ErrorCode))
		case kerr.TopicAuthorizationFailed.Code:
			return errReplicaDenied
		default:
			return fmt.Errorf("%w: fetch: %v", errRetry, kerr.ErrorForCode(sp.ErrorCode))
		}
		if len(sp.RecordBatches) > 0 {
			if err := f.append(sp.RecordBatches); err != nil {
				return err
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
		// Consumers the leader sent here read below this (KIP-392): wake
		// their long polls when it moves.
		f.p.SetHighWatermark(replica.FollowerHighWatermark(sp.HighWatermark, l.EndOffset()))
	}
	return nil
}

// append writes fetched batches; the log records them in its producer
// state.
func (f *fetcher) append(batches []byte) error {
	if f.stopped() {
		return errors.New("stopped")
	}
	if _, err := f.p.Log.AppendReplicated(batches); err != nil {
		return fmt.Errorf("appending replicated batches: %w", err)
	}
	return nil
}

// replicaConn is a plain Kafka-protocol client connection to a leader: one
// request at a time, encoded and decoded by kmsg.
type replicaConn struct {
	conn        net.Conn
	formatter   *kmsg.RequestFormatter
	correlation int32
	buf         []byte
	// session, when set, re-authenticates the connection before its SASL
	// session ends (sasl_client.go).
	session *replicaSession
}

// do sends req and decodes the answer into resp. Only non-flexible versions
// are used, so the response header is the correlation ID alone.
func (c *replicaConn) do(req kmsg.Request, resp kmsg.Response, timeout time.Duration) error {
	if err := c.session.renew(c); err != nil {
		return err
	}
	c.correlation++
	c.buf = c.formatter.AppendRequest(c.buf[:0], req, c.correlation)
	if err := c.conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return err
	}
	if _, err := c.conn.Write(c.buf); err != nil {
		return err
	}
	var size [4]byte
	if _, err := io.ReadFull(c.conn, size[:]); err != nil {
		return err
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 4 || n > maxReplicaResponse {
		return fmt.Errorf("response of %d bytes", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(c.conn, body); err != nil {
		return err
	}
	if got := int32(binary.BigEndian.Uint32(body)); got != c.correlation {
		return fmt.Errorf("correlation ID %d, expected %d", got, c.correlation)
	}
	resp.SetVersion(req.GetVersion())
	return resp.ReadFrom(body[4:])
}
