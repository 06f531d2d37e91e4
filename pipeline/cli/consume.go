package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func init() {
	register("consume", "consume TOPIC [--group G] [--from-beginning | --offset N --partition P] [--max N] [--format '%k %v']", consume)
}

// consume prints records until --max is reached or the user interrupts. In a
// group, only the records printed are committed, so an interrupted consumer
// resumes exactly after the last line it wrote.
func consume(ctx context.Context, e env, args []string) error {
	f := newFlags("consume")
	brokers := f.brokers()
	group := f.String("group", "", "consumer group (offsets are committed for it)")
	fromBeginning := f.Bool("from-beginning", false, "start at the earliest offset when there is no committed offset (default: the end)")
	offset := f.Int64("offset", -1, "start at this offset of --partition (no group)")
	partition := f.Int("partition", -1, "partition to read with --offset")
	maxRecords := f.Int("max", 0, "stop after this many records (0: never)")
	format := f.String("format", "%v", "output per record: %t topic, %p partition, %o offset, %k key, %v value, %T timestamp (ms), %h headers, \\n \\t")
	pos, err := f.parse(args, 1)
	if err != nil {
		return err
	}
	topic := pos[0]
	if (*offset >= 0) != (*partition >= 0) {
		return usageError("--offset and --partition go together")
	}
	if *offset >= 0 && *group != "" {
		return usageError("--offset cannot be used with --group (use group reset)")
	}
	start := kgo.NewOffset().AtEnd()
	if *fromBeginning {
		start = kgo.NewOffset().AtStart()
	}
	opts := []kgo.Opt{kgo.ConsumeResetOffset(start)}
	switch {
	case *offset >= 0:
		opts = append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
			topic: {int32(*partition): kgo.NewOffset().At(*offset)},
		}))
	case *group != "":
		opts = append(opts, kgo.ConsumeTopics(topic), kgo.ConsumerGroup(*group), kgo.AutoCommitMarks(), kgo.BlockRebalanceOnPoll())
	default:
		opts = append(opts, kgo.ConsumeTopics(topic))
	}
	cl, err := newClient(*brokers, opts...)
	if err != nil {
		return err
	}
	defer cl.Close()

	out := bufio.NewWriter(e.stdout)
	defer out.Flush()
	tmpl := parseFormat(*format)
	printed := 0
	for *maxRecords == 0 || printed < *maxRecords {
		fetches := cl.PollRecords(ctx, *maxRecords-printed)
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
			tmpl.write(out, r)
			printed++
		}
		if err := out.Flush(); err != nil {
			return err
		}
		if *group != "" {
			cl.MarkCommitRecords(fetches.Records()...)
		}
		cl.AllowRebalance()
	}
	if *group != "" {
		commitCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := cl.CommitMarkedOffsets(commitCtx); err != nil {
			return fmt.Errorf("commit offsets for group %s: %w", *group, err)
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
