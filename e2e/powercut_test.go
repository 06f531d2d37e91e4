package e2e

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestPowerCut simulates a power cut under an acks=all idempotent producer
// and a consumer that commits what it reads: the broker runs with its
// hidden --hold-unsynced-writes, which keeps every write not yet fsynced in
// the process's memory, so SIGKILL loses exactly what a power cut would.
//
// With millrace.flush.on.ack every acknowledged record is there exactly
// once after the restart, and the committed offset is not above the
// recovered log end. Without it (Kafka's default, acknowledged from the page
// cache) the same cut loses acknowledged records and leaves the committed
// offset above the log end: the layer does drop what was not fsynced, so the
// first half can fail.
func TestPowerCut(t *testing.T) {
	t.Parallel()
	for _, mode := range []struct {
		name       string
		flushOnAck bool
	}{{"flush-on-ack", true}, {"page-cache", false}} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			b := startBroker(t, "--hold-unsynced-writes")
			const topic = "powercut"
			flushOnAck := fmt.Sprint(mode.flushOnAck)
			b.createTopic(t, topic, 1, map[string]*string{"millrace.flush.on.ack": &flushOnAck})

			acked, committed := produceAndCommitUntilCut(t, b, topic)

			b.restart(syscall.SIGKILL)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			adm := b.admin(t)
			ends, err := adm.ListEndOffsets(ctx, topic)
			if err != nil {
				t.Fatal(err)
			}
			end, _ := ends.Lookup(topic, 0)
			counts := consumeValues(t, b, topic, end.Offset)
			var lost, twice int
			for v := range acked {
				switch counts[v] {
				case 0:
					lost++
				case 1:
				default:
					twice++
				}
			}
			for v, n := range counts {
				if n > 1 && !acked[v] {
					twice++
				}
			}
			// A commit cut off by stopping the reader may still have landed,
			// so the stored offset is at least the last one answered.
			fetched, err := adm.FetchOffsets(ctx, "powercut-reader")
			if err != nil {
				t.Fatal(err)
			}
			stored, _ := fetched.Lookup(topic, 0)
			if stored.At < committed {
				t.Fatalf("committed offset %d after the restart, %d was committed before", stored.At, committed)
			}
			t.Logf("%d records acknowledged, %d in the log after the cut (end offset %d), %d acknowledged ones lost, committed offset %d",
				len(acked), len(counts), end.Offset, lost, stored.At)
			if !mode.flushOnAck {
				if lost == 0 || stored.At <= end.Offset {
					t.Fatalf("without flush on ack the cut lost %d acknowledged records and left the committed offset %d at or below the log end %d: the layer dropped nothing", lost, stored.At, end.Offset)
				}
				return
			}
			if lost > 0 || twice > 0 {
				t.Fatalf("%d acknowledged records lost, %d records twice", lost, twice)
			}
			if stored.At > end.Offset {
				t.Fatalf("committed offset %d above the recovered log end %d", stored.At, end.Offset)
			}
		})
	}
}

// produceAndCommitUntilCut produces records "record-N" with an acks=all
// idempotent producer while a reader commits the offsets it has read (a
// simple commit, as a sink does after landing them), and stops both once at
// least 1,000 records were acknowledged and something was committed. It
// returns the acknowledged values and the last offset committed; the caller
// then cuts the power.
func produceAndCommitUntilCut(t *testing.T, b *broker, topic string) (acked map[string]bool, committed int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// A small buffer makes many small batches, so the cut falls mid-stream.
	producer, err := kgo.NewClient(kgo.SeedBrokers(b.addr), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.MaxBufferedRecords(200))
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu         sync.Mutex
		ackedSet   = map[string]bool{}
		lastCommit int64
		enough     = make(chan struct{})
		once       sync.Once
	)
	check := func() { // under mu
		if len(ackedSet) >= 1000 && lastCommit > 0 {
			once.Do(func() { close(enough) })
		}
	}
	produceCtx, stopProducing := context.WithCancel(ctx)
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		for i := 0; i < 50_000 && produceCtx.Err() == nil; i++ {
			value := fmt.Sprintf("record-%d", i)
			producer.Produce(produceCtx, &kgo.Record{Value: []byte(value)}, func(_ *kgo.Record, err error) {
				if err == nil {
					mu.Lock()
					ackedSet[value] = true
					check()
					mu.Unlock()
				}
			})
		}
	}()

	reader, err := kgo.NewClient(kgo.SeedBrokers(b.addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(reader)
	readCtx, stopReading := context.WithCancel(ctx)
	read := make(chan error, 1)
	go func() {
		for readCtx.Err() == nil {
			fetches := reader.PollFetches(readCtx)
			var next int64 = -1
			fetches.EachRecord(func(r *kgo.Record) { next = r.Offset + 1 })
			if next < 0 {
				continue
			}
			offsets := kadm.Offsets{}
			offsets.Add(kadm.Offset{Topic: topic, Partition: 0, At: next, LeaderEpoch: -1})
			resp, err := adm.CommitOffsets(readCtx, "powercut-reader", offsets)
			if err == nil {
				err = resp.Error()
			}
			if err != nil {
				if readCtx.Err() == nil {
					read <- err
				}
				break
			}
			mu.Lock()
			lastCommit = next
			check()
			mu.Unlock()
		}
		close(read)
	}()

	select {
	case <-enough:
	case err := <-read:
		t.Fatalf("reader: %v", err)
	case <-produced:
		t.Fatal("produced every record before 1,000 were acknowledged and one offset committed")
	case <-ctx.Done():
		t.Fatal("no 1,000 acknowledged records and committed offset within a minute")
	}
	// The cut, with produces and perhaps a commit in flight: the stored
	// offset is read back after the restart.
	b.kill()
	stopReading()
	for range read { // errors from the dead broker are expected
	}
	reader.Close()
	stopProducing()
	<-produced
	// Every record the producer saw acknowledged by now was answered
	// before the cut: the broker is gone and the producer is closed before
	// the restart.
	producer.Close()
	mu.Lock()
	defer mu.Unlock()
	return ackedSet, lastCommit
}

// consumeValues reads partition 0 of topic from the start up to end and
// counts each record value.
func consumeValues(t *testing.T, b *broker, topic string, end int64) map[string]int {
	t.Helper()
	counts := map[string]int{}
	if end == 0 {
		return counts
	}
	cl := b.client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for next := int64(0); next < end; {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read up to offset %d of %d: %v", next, end, err)
		}
		fetches.EachError(func(_ string, _ int32, err error) { t.Logf("fetch: %v", err) })
		fetches.EachRecord(func(r *kgo.Record) {
			counts[string(r.Value)]++
			next = r.Offset + 1
		})
	}
	return counts
}
