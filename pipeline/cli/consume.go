package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"
)

func init() {
	addCommand("", consumeCommand)
}

func consumeCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "consume TOPIC [--group G] [--from-beginning | --offset N --partition P] [--max N] [-e] [--format '%k %v'] [--decode]",
		Short: "print records, one per line",
		Args:  exactArgs(1),
	}
	f := cmd.Flags()
	var o consumeOptions
	f.StringVarP(&o.group, "group", "g", "", "consumer group (offsets are committed for it)")
	f.BoolVar(&o.fromBeginning, "from-beginning", false, "start at the earliest offset when there is no committed offset (default: the end)")
	f.Int64VarP(&o.offset, "offset", "o", -1, "start at this offset of --partition (no group)")
	f.IntVarP(&o.partition, "partition", "p", -1, "partition to read with --offset")
	f.IntVarP(&o.maxRecords, "max", "n", 0, "stop after this many records (0: never)")
	f.BoolVarP(&o.exitAtEnd, "exit-at-end", "e", false, "exit at each partition's end offset as of the start (kcat -e); --max may stop first")
	f.StringVarP(&o.format, "format", "f", "%v", "output per record: %t topic, %p partition, %o offset, %k key, %v value, %T timestamp (ms), %h headers, \\n \\t")
	f.BoolVar(&o.decode, "decode", false, "print values framed for the schema registry (Confluent's wire format) as JSON, decoded with their schemas")
	o.registry = addRegistryFlags(f)
	cmd.RunE = func(cmd *cobra.Command, args []string) error { return consume(cmd.Context(), e, args[0], o) }
	return cmd
}

// consumeOptions are the flags of consume.
type consumeOptions struct {
	group         string
	fromBeginning bool
	offset        int64
	partition     int
	maxRecords    int
	exitAtEnd     bool
	format        string
	// decode prints framed values as JSON; registry says where their
	// schemas are.
	decode   bool
	registry *registryFlags
}

// consume prints records until --max is reached, with --exit-at-end until
// every partition's end as of the start is, or until the user interrupts.
// A missing topic is an error at once. In a group, only the records printed
// are committed, so an interrupted consumer resumes exactly after the last
// line it wrote.
func consume(ctx context.Context, e *env, topic string, o consumeOptions) error {
	if (o.offset >= 0) != (o.partition >= 0) {
		return usageError("--offset and --partition go together")
	}
	if o.offset >= 0 && o.group != "" {
		return usageError("--offset cannot be used with --group (use group reset)")
	}
	if o.maxRecords < 0 {
		return usageError("--max must not be negative")
	}
	var decoder *valueDecoder
	if o.decode {
		var err error
		if decoder, err = newValueDecoder(o.registry, e.stderr); err != nil {
			return err
		}
		defer decoder.finish()
	}
	adm, closeAdmin, err := e.newAdmin(ctx)
	if err != nil {
		return err
	}
	defer closeAdmin()
	partitions, err := partitionsOf(ctx, adm, topic)
	if err != nil {
		return err
	}
	if o.partition >= 0 && !slices.Contains(partitions, int32(o.partition)) {
		return fmt.Errorf("topic %s has no partition %d (it has %d)", topic, o.partition, len(partitions))
	}
	var end *endTracker
	if o.exitAtEnd {
		if end, err = newEndTracker(ctx, adm, topic, partitions, o); err != nil {
			return err
		}
	}
	start := kgo.NewOffset().AtEnd()
	if o.fromBeginning {
		start = kgo.NewOffset().AtStart()
	}
	opts := []kgo.Opt{kgo.ConsumeResetOffset(start)}
	switch {
	case o.offset >= 0:
		at := o.offset
		if end != nil {
			at = end.next[int32(o.partition)] // clamped to the log start
		}
		opts = append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
			topic: {int32(o.partition): kgo.NewOffset().At(at)},
		}))
	case o.group != "":
		opts = append(opts, kgo.ConsumeTopics(topic), kgo.ConsumerGroup(o.group), kgo.AutoCommitMarks(), kgo.BlockRebalanceOnPoll())
	default:
		opts = append(opts, kgo.ConsumeTopics(topic))
	}
	if end != nil {
		// A transaction's marker may be a partition's last offset: the
		// tracker must see it to know the end is reached.
		opts = append(opts, kgo.KeepControlRecords())
	}
	cl, err := e.newClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	if o.group != "" {
		// Runs before Close: a poll interrupted by SIGTERM may hold a
		// rebalance (BlockRebalanceOnPoll), and Close's leave would wait
		// for it forever; the leave is bounded so a broker that is gone
		// cannot hold the exit either.
		defer func() {
			cl.AllowRebalance()
			leaveCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = cl.LeaveGroupContext(leaveCtx) // the session ends by timeout otherwise
		}()
	}

	out := bufio.NewWriter(e.stdout)
	defer out.Flush()
	tmpl := parseFormat(o.format)
	printed := 0
	for (o.maxRecords == 0 || printed < o.maxRecords) && (end == nil || !end.done()) {
		fetches := cl.PollRecords(ctx, o.maxRecords-printed)
		if ctx.Err() != nil {
			break
		}
		var fetchErr error
		fetches.EachError(func(t string, p int32, err error) {
			fetchErr = fmt.Errorf("fetch %s/%d: %w", t, p, err)
		})
		if fetchErr != nil {
			return fetchErr
		}
		for _, r := range fetches.Records() {
			if end != nil {
				end.saw(r)
				if r.Attrs.IsControl() {
					continue
				}
			}
			if decoder != nil {
				if r, err = decoder.decode(ctx, r); err != nil {
					return err
				}
			}
			tmpl.write(out, r)
			printed++
		}
		if err := out.Flush(); err != nil {
			return err
		}
		if o.group != "" {
			cl.MarkCommitRecords(fetches.Records()...)
		}
		cl.AllowRebalance()
	}
	if o.group != "" {
		commitCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := cl.CommitMarkedOffsets(commitCtx); err != nil {
			return fmt.Errorf("commit offsets for group %s: %w", o.group, err)
		}
	}
	return nil
}

// recordFormat is a parsed --format: literal text and %-verbs in order.
type recordFormat []formatPart

type formatPart struct {
	verb    byte   // 0 for literal text
	literal string // when verb == 0
}

func parseFormat(s string) recordFormat {
	s = strings.NewReplacer(`\n`, "\n", `\t`, "\t").Replace(s)
	if !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	var parts recordFormat
	var lit strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+1 < len(s) && strings.IndexByte("tpokvTh", s[i+1]) >= 0 {
			if lit.Len() > 0 {
				parts = append(parts, formatPart{literal: lit.String()})
				lit.Reset()
			}
			parts = append(parts, formatPart{verb: s[i+1]})
			i++
			continue
		}
		lit.WriteByte(s[i])
	}
	if lit.Len() > 0 {
		parts = append(parts, formatPart{literal: lit.String()})
	}
	return parts
}

func (f recordFormat) write(w io.Writer, r *kgo.Record) {
	for _, p := range f {
		switch p.verb {
		case 0:
			io.WriteString(w, p.literal)
		case 't':
			io.WriteString(w, r.Topic)
		case 'p':
			io.WriteString(w, strconv.Itoa(int(r.Partition)))
		case 'o':
			io.WriteString(w, strconv.FormatInt(r.Offset, 10))
		case 'k':
			w.Write(r.Key)
		case 'v':
			w.Write(r.Value)
		case 'T':
			io.WriteString(w, strconv.FormatInt(r.Timestamp.UnixMilli(), 10))
		case 'h':
			for i, h := range r.Headers {
				if i > 0 {
					io.WriteString(w, ",")
				}
				io.WriteString(w, h.Key+"="+string(h.Value))
			}
		}
	}
}
