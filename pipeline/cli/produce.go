package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"
)

func init() {
	addCommand("", produceCommand)
}

func produceCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "produce TOPIC [--key-separator SEP] [--partitioner hash|random|round-robin] [--compression zstd|lz4|snappy|gzip|none] [--acks all|1|0] [--value-schema SUBJECT]",
		Short: "send one record per line of standard input",
		Args:  exactArgs(1),
	}
	f := cmd.Flags()
	var o produceOptions
	f.StringVarP(&o.keySep, "key-separator", "K", "", "split each line at the first SEP into key and value")
	f.StringVar(&o.partitioner, "partitioner", "hash", "hash (murmur2 of the key, as Kafka), random or round-robin")
	f.StringVarP(&o.compression, "compression", "z", "none", "zstd, lz4, snappy, gzip or none")
	f.StringVar(&o.acks, "acks", "all", "all, 1 or 0")
	f.IntVar(&o.maxLine, "max-line-bytes", 1<<20, "longest accepted input line")
	f.DurationVar(&o.timeout, "timeout", 30*time.Second, "give up on a record not acknowledged within this time")
	f.StringVar(&o.valueSchema, "value-schema", "", "read each value as JSON and send it encoded with this `subject`'s latest schema, framed with its ID (Confluent's wire format)")
	o.registry = addRegistryFlags(f)
	cmd.RunE = func(cmd *cobra.Command, args []string) error { return produce(cmd.Context(), e, args[0], o) }
	return cmd
}

// produceOptions are the flags of produce.
type produceOptions struct {
	keySep, partitioner, compression, acks string
	maxLine                                int
	timeout                                time.Duration
	// valueSchema is the subject values are encoded with ("" sends the
	// lines as they are); registry says where it lives.
	valueSchema string
	registry    *registryFlags
}

// producerOpts turns the shared producer flags into client options.
func producerOpts(acks, compression, partitioner string) ([]kgo.Opt, error) {
	var opts []kgo.Opt
	switch acks {
	case "all", "-1":
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	case "1":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	case "0":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	default:
		return nil, usageError("--acks must be all, 1 or 0, not %q", acks)
	}
	codec, err := codecFor(compression)
	if err != nil {
		return nil, err
	}
	opts = append(opts, kgo.ProducerBatchCompression(codec))
	switch partitioner {
	case "hash":
		// Kafka's default: murmur2 of the key, so keys land where Java
		// clients put them; unkeyed records stick to a partition per batch.
		opts = append(opts, kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	case "round-robin":
		opts = append(opts, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	case "random":
		opts = append(opts, kgo.RecordPartitioner(kgo.BasicConsistentPartitioner(func(string) func(*kgo.Record, int) int {
			return func(_ *kgo.Record, n int) int { return rand.IntN(n) }
		})))
	default:
		return nil, usageError("--partitioner must be hash, random or round-robin, not %q", partitioner)
	}
	return opts, nil
}

func codecFor(name string) (kgo.CompressionCodec, error) {
	switch name {
	case "none", "":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.CompressionCodec{}, usageError("--compression must be zstd, lz4, snappy, gzip or none, not %q", name)
}

// produce sends one record per stdin line and exits once every record is
// acknowledged, or with the first error.
func produce(ctx context.Context, e *env, topic string, o produceOptions) error {
	opts, err := producerOpts(o.acks, o.compression, o.partitioner)
	if err != nil {
		return err
	}
	var encode func(line int, value []byte) ([]byte, error)
	if o.valueSchema != "" {
		if encode, err = valueEncoder(ctx, o.registry, o.valueSchema); err != nil {
			return err
		}
	}
	cl, err := e.newClient(append(opts, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond), kgo.RecordDeliveryTimeout(o.timeout))...)
	if err != nil {
		return err
	}
	defer cl.Close()

	var (
		mu       sync.Mutex
		firstErr error
		sent     int
	)
	promise := func(_ *kgo.Record, err error) {
		if err != nil {
			mu.Lock()
			if firstErr == nil {
				firstErr = err
			}
			mu.Unlock()
		}
	}
	sc := bufio.NewScanner(e.stdin)
	sc.Buffer(make([]byte, 64<<10), o.maxLine)
	for sc.Scan() {
		line := sc.Text()
		r := &kgo.Record{Value: []byte(line)}
		if o.keySep != "" {
			if k, v, ok := strings.Cut(line, o.keySep); ok {
				r.Key, r.Value = []byte(k), []byte(v)
			}
		}
		if encode != nil {
			// A line that cannot be encoded stops the run; the lines
			// before it are still flushed below.
			if r.Value, err = encode(sent+1, r.Value); err != nil {
				break
			}
		}
		cl.Produce(ctx, r, promise)
		sent++
	}
	if err == nil {
		if err = sc.Err(); errors.Is(err, bufio.ErrTooLong) {
			err = fmt.Errorf("line %d is longer than --max-line-bytes %d", sent+1, o.maxLine)
		}
	}
	if flushErr := cl.Flush(ctx); flushErr != nil {
		return errors.Join(err, flushErr)
	}
	if err != nil {
		return err
	}
	mu.Lock()
	defer mu.Unlock()
	if firstErr != nil {
		return fmt.Errorf("produce to %s: %w", topic, firstErr)
	}
	fmt.Fprintf(e.stderr, "produced %d records to %s\n", sent, topic)
	return nil
}
