package e2e

// Client processes the transaction tests kill and stop: the test binary
// runs itself with roleEnv set, and TestMain hands over to runRole instead
// of running tests.

import (
	"context"
	"errors"
	"fmt"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// roleEnv names the role a re-executed test binary plays.
const roleEnv = "MILLRACE_E2E_ROLE"

// runRole plays role with args and returns the process's exit code.
func runRole(role string, args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	var err error
	switch role {
	case "txn-etl":
		err = txnETL(ctx, args)
	case "txn-zombie":
		err = txnZombie(ctx, args)
	default:
		err = fmt.Errorf("unknown role %q", role)
	}
	if errors.Is(err, errFenced) {
		fmt.Println("FENCED:", err)
		return 3
	}
	if err != nil && ctx.Err() == nil {
		fmt.Println("ERROR:", err)
		return 1
	}
	return 0
}

var errFenced = errors.New("fenced")

// txnETL is a consume-transform-produce member (kgo's
// GroupTransactSession): args are seeds (comma-separated), group, input
// topic, output topic and transactional ID. Every input record's value is
// produced to the output topic in the transaction that commits its offset.
func txnETL(ctx context.Context, args []string) error {
	if len(args) != 5 {
		return fmt.Errorf("txn-etl: want seeds group in out txn-id, got %q", args)
	}
	seeds, group, in, out, id := strings.Split(args[0], ","), args[1], args[2], args[3], args[4]
	sess, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(seeds...),
		kgo.TransactionalID(id),
		kgo.TransactionTimeout(10*time.Second),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(in),
		kgo.SessionTimeout(6*time.Second),
		kgo.DefaultProduceTopic(out),
		kgo.ProducerLinger(5*time.Millisecond),
		kgo.FetchMaxWait(200*time.Millisecond),
		kgo.RecordRetries(20),
	)
	if err != nil {
		return err
	}
	defer sess.Close()
	for ctx.Err() == nil {
		fetches := sess.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil
		}
		fetches.EachError(func(t string, p int32, err error) {
			fmt.Printf("fetch %s/%d: %v\n", t, p, err)
		})
		if fetches.NumRecords() == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			sess.Produce(ctx, kgo.SliceRecord(r.Value), func(_ *kgo.Record, err error) {
				if err != nil {
					fmt.Println("produce:", err)
				}
			})
		})
		committed, err := sess.End(ctx, kgo.TryCommit)
		if err != nil {
			fmt.Println("end:", err)
		}
		fmt.Println("end: committed", committed, "records", fetches.NumRecords())
	}
	return nil
}

// txnZombie produces transactions of ten records ("<prefix>-<txn>-<i>") to
// a topic: args are seeds, topic, transactional ID, prefix, the
// transaction to hold open (-1 for none) and how many to commit. After committing a transaction it prints
// "COMMITTED <txn>"; the held one prints "HOLDING <txn>" once its records
// are on the broker and waits a while before going on, which is when a
// test stops it. Fencing ends the process with exit code 3.
func txnZombie(ctx context.Context, args []string) error {
	if len(args) != 6 {
		return fmt.Errorf("txn-zombie: want seeds topic txn-id prefix hold count, got %q", args)
	}
	seeds, topic, id, prefix := strings.Split(args[0], ","), args[1], args[2], args[3]
	hold, err := strconv.Atoi(args[4])
	if err != nil {
		return err
	}
	count, err := strconv.Atoi(args[5])
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.TransactionalID(id), kgo.DefaultProduceTopic(topic),
		kgo.TransactionTimeout(60*time.Second), kgo.RecordRetries(5))
	if err != nil {
		return err
	}
	defer cl.Close()
	fenced := func(err error) error {
		if errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) || errors.Is(err, kerr.InvalidProducerIDMapping) {
			return fmt.Errorf("%w: %v", errFenced, err)
		}
		return err
	}
	for txn := 0; txn < count && ctx.Err() == nil; txn++ {
		if err := cl.BeginTransaction(); err != nil {
			return fenced(err)
		}
		for i := 0; i < 10; i++ {
			v := fmt.Sprintf("%s-%d-%d", prefix, txn, i)
			if err := cl.ProduceSync(ctx, kgo.StringRecord(v)).FirstErr(); err != nil {
				return fenced(err)
			}
			if txn == hold && i == 4 {
				fmt.Println("HOLDING", txn)
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(3 * time.Second):
				}
			}
		}
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			return fenced(err)
		}
		fmt.Println("COMMITTED", txn)
	}
	return nil
}
