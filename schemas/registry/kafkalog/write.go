package kafkalog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/schemas/registry"
)

// abortTimeout bounds the abort of a failed transaction, which runs after
// the caller's context may have ended.
const abortTimeout = 10 * time.Second

// errNotWriter is Append's answer while this process holds no claim.
var errNotWriter = fmt.Errorf("%w: this registry is not the elected primary", registry.ErrFenced)

// Claim makes this process the topic's writer: it ensures the topic and
// initialises a new transactional producer, whose InitProducerId fences
// the previous writer (the package comment says why that is enough). Call
// it only after winning the election; the election reports this process
// primary once Claim has returned.
func (l *Log) Claim(ctx context.Context) error {
	if err := l.ensureTopic(ctx); err != nil {
		return err
	}
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	if l.closed {
		return errors.New("kafkalog: the log is closed")
	}
	l.dropProducerLocked()
	opts := append(append([]kgo.Opt(nil), l.cfg.Opts...),
		kgo.TransactionalID(l.cfg.TransactionalID),
		kgo.TransactionTimeout(l.cfg.TransactionTimeout),
		kgo.DefaultProduceTopic(l.cfg.Topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("kafkalog: %w", err)
	}
	if _, _, err := cl.ProducerID(ctx); err != nil {
		cl.Close()
		return fmt.Errorf("kafkalog: initialising the transactional producer %q: %w", l.cfg.TransactionalID, err)
	}
	l.producer = cl
	l.logger.Info("claimed the schema registry's topic as its writer", "transactional_id", l.cfg.TransactionalID)
	return nil
}

// Release gives the claim up (the election was lost): later Appends fail
// with registry.ErrFenced until the next Claim.
func (l *Log) Release() {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	l.dropProducerLocked()
}

func (l *Log) dropProducerLocked() {
	if l.producer != nil {
		l.producer.Close()
		l.producer = nil
	}
}

// Append writes records in one transaction (begin, produce all, commit)
// and returns the offset of the last. A fenced producer's error wraps
// registry.ErrFenced.
func (l *Log) Append(ctx context.Context, records []registry.Record) (int64, error) {
	if len(records) == 0 {
		return 0, errors.New("kafkalog: nothing to append")
	}
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	p := l.producer
	if p == nil {
		return 0, errNotWriter
	}
	if err := p.BeginTransaction(); err != nil {
		return 0, l.failedLocked(p, err)
	}
	recs := make([]*kgo.Record, len(records))
	for i, r := range records {
		recs[i] = &kgo.Record{Key: r.Key, Value: r.Value, Partition: 0}
	}
	results := p.ProduceSync(ctx, recs...)
	if err := results.FirstErr(); err != nil {
		return 0, l.failedLocked(p, err)
	}
	if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return 0, l.failedLocked(p, err)
	}
	return recs[len(recs)-1].Offset, nil
}

// failedLocked ends a failed transaction and returns the error Append
// reports. Fenced: the producer is dropped and the election told. Otherwise
// the transaction is aborted; when even that fails its state is unknown
// (a commit may have been decided), so the producer is dropped and the
// election told as well: only winning the election again may claim anew,
// never a retry here, which could fence a successor this process has not
// heard of.
func (l *Log) failedLocked(p *kgo.Client, err error) error {
	if fenced(err) {
		l.logger.Warn("another primary has taken over the schema registry's topic", "err", err)
		l.dropProducerLocked()
		l.notifyFenced()
		return fmt.Errorf("%w: %v", registry.ErrFenced, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), abortTimeout)
	defer cancel()
	abortErr := p.AbortBufferedRecords(ctx)
	if abortErr == nil {
		abortErr = p.EndTransaction(ctx, kgo.TryAbort)
	}
	if abortErr != nil {
		l.logger.Warn("aborting a failed schema registry write failed; giving the writer role up", "err", err, "abort_err", abortErr)
		l.dropProducerLocked()
		l.notifyFenced()
		if fenced(abortErr) {
			return fmt.Errorf("%w: %v", registry.ErrFenced, abortErr)
		}
	}
	return fmt.Errorf("kafkalog: appending to %s: %w", l.cfg.Topic, err)
}

func (l *Log) notifyFenced() {
	if l.cfg.OnFenced != nil {
		l.cfg.OnFenced()
	}
}

// fenced reports the errors by which a transaction coordinator or a
// partition leader refuses a producer whose epoch was bumped by another
// InitProducerId (KIP-98; PRODUCER_FENCED since KIP-588).
func fenced(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) ||
		errors.Is(err, kerr.InvalidProducerIDMapping)
}
