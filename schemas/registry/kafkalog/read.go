package kafkalog

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/schemas/registry"
)

// maxReadRecords bounds what one Read returns; the reader calls again.
const maxReadRecords = 1000

// Read returns the committed records at offsets from `from` on, in order,
// waiting until there is at least one or ctx is done. Records of aborted
// transactions are skipped (read_committed) and each transaction marker
// comes back as a NoopKey record (the package comment says why).
func (l *Log) Read(ctx context.Context, from int64) ([]registry.Record, error) {
	if from < 0 {
		return nil, fmt.Errorf("kafkalog: read from offset %d: offsets start at 0", from)
	}
	if err := l.ensureTopic(ctx); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(l.closing, cancel)()
	l.readMu.Lock()
	defer l.readMu.Unlock()
	if l.closing.Err() != nil {
		return nil, errors.New("kafkalog: the log is closed")
	}
	if l.reader == nil || from != l.next {
		if err := l.seekLocked(from); err != nil {
			return nil, err
		}
	}
	for {
		if err := l.fillLocked(ctx); err != nil {
			return nil, err
		}
		n := min(len(l.buffer), maxReadRecords)
		out := make([]registry.Record, 0, n)
		for _, r := range l.buffer[:n] {
			if r.Offset < from {
				continue // a fetch may begin before the requested offset
			}
			rec := registry.Record{Key: r.Key, Value: r.Value, Offset: r.Offset}
			if r.Attrs.IsControl() {
				rec = registry.Record{Key: NoopKey, Offset: r.Offset}
			}
			out = append(out, rec)
		}
		l.buffer = l.buffer[n:]
		if len(l.buffer) == 0 {
			l.buffer = nil
		}
		if len(out) > 0 {
			l.next = out[len(out)-1].Offset + 1
			return out, nil
		}
	}
}

// fillLocked waits for fetched records when none are buffered.
func (l *Log) fillLocked(ctx context.Context) error {
	for len(l.buffer) == 0 {
		fetches := l.reader.PollRecords(ctx, maxReadRecords)
		if err := ctx.Err(); err != nil {
			return err
		}
		var errs []error
		fetches.EachError(func(_ string, _ int32, err error) { errs = append(errs, err) })
		if errors.Is(errors.Join(errs...), kgo.ErrClientClosed) {
			return errors.New("kafkalog: the log is closed")
		}
		for _, err := range errs {
			// Fetch errors (a leader moving, the topic being created)
			// are retried by the client; they are worth a line.
			l.logger.Debug("reading the schema registry's topic", "err", err)
		}
		l.buffer = append(l.buffer, fetches.Records()...)
	}
	return nil
}

// seekLocked points a new reader at offset from. Only the first Read and a
// reader that restarts from elsewhere pay for it; a caller reading on from
// where it was keeps the reader and its buffered fetches.
func (l *Log) seekLocked(from int64) error {
	if l.reader != nil {
		l.reader.Close()
		l.reader = nil
	}
	opts := append(append([]kgo.Opt(nil), l.cfg.Opts...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{l.cfg.Topic: {0: kgo.NewOffset().At(from)}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("kafkalog: %w", err)
	}
	l.reader, l.next, l.buffer = cl, from, nil
	return nil
}

// End returns the topic's last stable offset: every record below it is
// committed or aborted, so a reader that has passed it has seen every write
// whose markers are written, and each write still open lands at or above
// it. The markers of a commit are written just after Append returns (Kafka
// answers EndTxn once the decision is stored), so a writer waits for its
// own write by reading through the offset Append returned, not by End;
// after Claim, End covers every write of the previous writers, since the
// coordinator completes a decided transaction before it answers the new
// InitProducerId.
func (l *Log) End(ctx context.Context) (int64, error) {
	if err := l.ensureTopic(ctx); err != nil {
		return 0, err
	}
	offsets, err := kadm.NewClient(l.admin).ListCommittedOffsets(ctx, l.cfg.Topic)
	if err != nil {
		return 0, fmt.Errorf("kafkalog: listing the end of %s: %w", l.cfg.Topic, err)
	}
	o, ok := offsets.Lookup(l.cfg.Topic, 0)
	if !ok {
		return 0, fmt.Errorf("kafkalog: listing the end of %s: partition 0 is missing from the answer", l.cfg.Topic)
	}
	if o.Err != nil {
		return 0, fmt.Errorf("kafkalog: listing the end of %s: %w", l.cfg.Topic, o.Err)
	}
	return o.Offset, nil
}
