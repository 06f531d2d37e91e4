package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"millrace/pipeline/monitor"
)

func init() {
	addCommand("", func(e *env) *cobra.Command {
		cmd := &cobra.Command{
			Use:   "top [-b BROKERS] [--interval 2s] [--metrics-topic T] [--once] [--metrics [--match TEXT] [--limit N]]",
			Short: "live view of rates, lag and component throughput, or of the latest metric values",
			Args:  exactArgs(0),
		}
		f := cmd.Flags()
		var o topOptions
		f.DurationVar(&o.interval, "interval", 2*time.Second, "time between cluster reads and redraws")
		f.StringVar(&o.metricsTopic, "metrics-topic", monitor.DefaultMetricsTopic, "ops metrics topic to follow for component throughput")
		f.BoolVar(&o.once, "once", false, "print one view (rates over one interval) and exit")
		f.BoolVar(&o.metrics, "metrics", false, "show the latest value of every metric series (the components' own and those posted to /v1/metrics) instead of the cluster")
		f.StringVar(&o.match, "match", "", "with --metrics: only series whose name, a label (name=value) or source contains this text")
		f.IntVarP(&o.limit, "limit", "n", 100, "with --metrics: most series shown")
		f.StringArrayVar(&o.sampleTopics, "samples-topic", []string{monitor.DefaultSampleTopic}, "topic of posted metric samples to follow (repeatable)")
		f.StringVar(&o.logLevel, "log-level", "error", "debug, info, warn or error (logs go to stderr)")
		cmd.RunE = func(cmd *cobra.Command, _ []string) error { return runTop(cmd.Context(), e, o) }
		return cmd
	})
}

// topOptions are the flags of top.
type topOptions struct {
	interval                      time.Duration
	metricsTopic, logLevel, match string
	sampleTopics                  []string
	once, metrics                 bool
	limit                         int
}

// Terminal control: home the cursor and clear, hide and show the cursor.
const (
	termClear      = "\x1b[H\x1b[2J"
	termHideCursor = "\x1b[?25l"
	termShowCursor = "\x1b[?25h"
)

// runTop redraws the monitor's tables every interval until q or Ctrl-C.
// With --once it waits for two cluster reads one interval apart, so the
// rates exist, prints the tables once without control codes and exits.
func runTop(ctx context.Context, e *env, o topOptions) error {
	if o.interval < 100*time.Millisecond {
		return usageError("--interval must be at least 100ms")
	}
	if o.limit < 1 {
		return usageError("--limit must be at least 1")
	}
	logger, err := newLogger(*e, o.logLevel)
	if err != nil {
		return err
	}
	s := e.client.seeds()
	if len(s) == 0 {
		return usageError("no brokers given")
	}
	security, err := e.client.settings()
	if err != nil {
		return err
	}
	col, err := monitor.New(monitor.Config{Brokers: s, Security: security, Interval: o.interval, MetricsTopic: o.metricsTopic,
		SampleTopics: o.sampleTopics}, logger)
	if err != nil {
		return err
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err = col.Ping(pingCtx)
	cancel()
	if err != nil {
		col.Shutdown(context.Background())
		return fmt.Errorf("cannot reach brokers %s: %w", e.client.brokers, err)
	}
	if err := col.Start(ctx); err != nil {
		return err
	}
	defer col.Shutdown(context.Background())
	draw := func(w io.Writer, snap monitor.Snapshot) error { return monitor.WriteText(w, snap) }
	if o.metrics {
		draw = func(w io.Writer, snap monitor.Snapshot) error {
			return monitor.WriteMetricsText(w, col.MetricSeries(o.match, o.limit), o.match, snap.Time)
		}
	}
	if o.once {
		return topOnce(ctx, *e, col, draw)
	}
	return topLive(ctx, *e, col, draw)
}

func topOnce(ctx context.Context, e env, col *monitor.Collector, draw func(io.Writer, monitor.Snapshot) error) error {
	for {
		updated := col.Updated()
		// A third read gives errors of a starting cluster (a coordinator
		// still loading) a chance to clear; past it they are the cluster's
		// state (a broker down or hung) and are printed with the view.
		if snap := col.Latest(); snap.Seq >= 2 && len(snap.Errors) == 0 || snap.Seq >= 3 {
			return draw(e.stdout, snap)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-updated:
		}
	}
}

func topLive(ctx context.Context, e env, col *monitor.Collector, draw func(io.Writer, monitor.Snapshot) error) error {
	ctx, quit := context.WithCancel(ctx)
	defer quit()
	var keys sync.WaitGroup
	if in, ok := e.stdin.(*os.File); ok {
		restore, err := rawInput(in)
		if err == nil {
			defer restore()
			keys.Add(1)
			go func() {
				defer keys.Done()
				readQuitKey(ctx, in, quit)
			}()
		}
	}
	defer keys.Wait() // after quit (deferred later, runs first) ends the reader
	defer quit()
	fmt.Fprint(e.stdout, termHideCursor)
	defer fmt.Fprint(e.stdout, termShowCursor)
	var frame bytes.Buffer
	for {
		updated := col.Updated()
		if snap := col.Latest(); snap.Seq > 0 {
			frame.Reset()
			frame.WriteString(termClear)
			draw(&frame, snap)
			frame.WriteString("\n(q or Ctrl-C quits)\n")
			if _, err := e.stdout.Write(frame.Bytes()); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return nil // q or Ctrl-C: a normal end
		case <-updated:
		}
	}
}

// rawInput turns off line buffering and echo on a terminal so a single q
// is read at once. Signals stay on (Ctrl-C still interrupts), and reads
// return after a tenth of a second without input, so the key reader can
// notice the end and be joined. It fails on anything but a terminal.
func rawInput(f *os.File) (restore func(), err error) {
	fd := int(f.Fd())
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return nil, err
	}
	raw := *old
	raw.Lflag &^= unix.ICANON | unix.ECHO
	raw.Cc[unix.VMIN], raw.Cc[unix.VTIME] = 0, 1
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &raw); err != nil {
		return nil, err
	}
	return func() { unix.IoctlSetTermios(fd, unix.TCSETS, old) }, nil
}

// readQuitKey calls quit when q or Q is typed, or when input ends.
func readQuitKey(ctx context.Context, in *os.File, quit func()) {
	buf := make([]byte, 16)
	for ctx.Err() == nil {
		n, err := in.Read(buf)
		if bytes.ContainsAny(buf[:n], "qQ") {
			quit()
			return
		}
		if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			return // input closed: keep drawing until Ctrl-C
		}
	}
}
