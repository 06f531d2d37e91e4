package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"

	"github.com/spf13/cobra"

	"millrace/agents/ship"
	"millrace/agents/tail"
	"millrace/audit"
)

func init() {
	addCommand("", tailCommand)
}

func tailCommand(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tail --topic T [--data DIR] [--config agent.yaml] [--metrics-listen ADDR] [--symlinks] GLOB...",
		Short: "ship log lines of the files the globs match, checkpointing what the broker acknowledged",
		Args:  anyArgs,
	}
	f := cmd.Flags()
	var o tailOptions
	f.StringVarP(&o.topic, "topic", "t", "", "topic for the log lines")
	f.StringVar(&o.data, "data", "", "directory of the checkpoint registry")
	f.StringVar(&o.metricsAddr, "metrics-listen", "", "serve Prometheus /metrics, and /readyz (503 while records cannot ship), on this address")
	f.BoolVar(&o.symlinks, "symlinks", false, "follow symbolic links the globs match (tail.symlinks; default: skip them)")
	addAgentFlags(f, &o.agent, "YAML file with ship: and tail: sections (flags override)", "how long to wait for acknowledgements on shutdown")
	cmd.RunE = func(cmd *cobra.Command, globs []string) error {
		return runTail(cmd.Context(), e, globs, o, cmd.Flags().Changed("symlinks"))
	}
	return cmd
}

// tailOptions are the flags of tail.
type tailOptions struct {
	topic, data, metricsAddr string
	symlinks                 bool
	agent                    agentOptions
}

// tailFile is the YAML layout of `millrace tail --config`.
type tailFile struct {
	// The ship: and audit: sections.
	agentSections `yaml:",inline"`
	// Tail is what to follow and how.
	Tail tail.Config `yaml:"tail"`
}

// runTail ships log lines until SIGINT/SIGTERM, then waits for the broker to
// acknowledge what was read (up to --shutdown-timeout) and checkpoints.
func runTail(ctx context.Context, e *env, globs []string, o tailOptions, symlinksGiven bool) error {
	var cfg tailFile
	p, err := newAgentProc(e, "tail", o.agent, &cfg)
	if err != nil {
		return err
	}
	override([]flagOverride{{o.topic, &cfg.Tail.Topic}, {o.data, &cfg.Tail.DataDir}})
	if len(globs) > 0 {
		cfg.Tail.Paths = globs
	}
	if symlinksGiven {
		cfg.Tail.Symlinks = o.symlinks
	}
	if len(cfg.Tail.Paths) == 0 {
		return usageError("give at least one GLOB (or tail.paths in --config)")
	}
	if cfg.Tail.DataDir == "" {
		return usageError("--data DIR (or tail.data_dir) is required: it holds the checkpoints")
	}
	tailer, err := startProducer(ctx, p, tailShipDefaults(cfg.Ship), o.metricsAddr, func(s *ship.Shipper) (*tail.Tailer, error) {
		if limit, ok := tailMemoryLimit(s.Config()); ok {
			debug.SetMemoryLimit(limit)
			p.logger.Info("memory limit", "bytes", limit)
		}
		return tail.New(cfg.Tail, s, p.reg, p.logger)
	})
	if err != nil {
		return err
	}
	instance := cfg.Audit.Instance
	if instance == "" && cfg.Audit.On() {
		if instance, err = audit.InstanceID(tailer.Config().DataDir); err != nil {
			return p.abort(ctx, err)
		}
	}
	counter, err := p.startCounter(ctx, audit.RoleTail, instance, true, 0)
	if err != nil {
		return err
	}
	if counter != nil {
		tailer.SetAudit(counter)
	}
	// The tailer runs on its own context: a signal means a clean shutdown,
	// not the crash-like stop that cancelling the Start context means.
	if err := tailer.Start(context.Background()); err != nil {
		return p.abort(ctx, err)
	}
	err = p.run(ctx, filepath.Base(tailer.Config().DataDir), "tail", func(ctx context.Context) error {
		p.logger.Info("shutting down: waiting for acknowledgements", "timeout", o.agent.shutdownTimeout)
		return tailer.Shutdown(ctx)
	})
	if err != nil {
		return fmt.Errorf("%w (unacknowledged lines are read again on the next start)", err)
	}
	return nil
}

// tailBufferedBytes is the tail command's default ship.max_buffered_bytes,
// under the producer's general default. A tailer needs no large buffer:
// while the broker is slow or down it stops reading and its files keep the
// lines, and a buffer only has to cover the batches in flight: one being
// filled, one being compressed and sent, one whose acknowledgements are
// being processed (kgo frees a batch's room only once all of them are),
// and room to spare. The buffer counts each line's memory, about 900 bytes
// for a 150-byte log line (ship.RecordOverhead), so 12 MiB holds about
// five 1 MiB batches of such lines: with four the reader waited for room
// about a quarter of the time; five shipped a 1 GiB file about 5% faster
// (median of 8 alternating pairs, peak RSS 2 MiB higher), six or eight
// faster still but with peak RSS at 58 and 62 MiB. A beacon has no file
// behind it, so it keeps the larger default.
const tailBufferedBytes = 12 << 20

// tailHeapRoom is what tailMemoryLimit leaves the heap above a full buffer
// and its batches in flight: with the default buffer, a limit of 30 MiB,
// at which peak RSS while shipping stayed under 64 MiB (at 32 MiB it rose
// by 2-3 MiB, once to 65).
const tailHeapRoom = 14 << 20

// tailShipDefaults applies the tail command's own producer defaults.
func tailShipDefaults(c ship.Config) ship.Config {
	if c.MaxBufferedBytes == 0 {
		// Room for a few batches even when they are configured larger.
		c.MaxBufferedBytes = max(tailBufferedBytes, 4*int(c.MaxBatchBytes))
	}
	return c
}

// tailMemoryLimit is the Go memory limit for the tail command, unless
// GOMEMLIMIT already sets one. The tailer's live memory is mostly the
// producer's buffer when it is full, which it is whenever reading is
// faster than shipping, and the buffer counts what its lines hold. The rest
// is the requests being built, compressed and sent (a few batches) and the
// runtime's own. Without a limit the collector lets the heap grow to twice
// the live memory; a limit at the live memory itself makes it collect
// without pause (measured before records were reused: 12 MiB of room above
// a full 16 MiB buffer nearly tripled the CPU per line), so the limit
// leaves tailHeapRoom above them.
func tailMemoryLimit(cfg ship.Config) (int64, bool) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return 0, false
	}
	return int64(cfg.MaxBufferedBytes) + 4*int64(cfg.MaxBatchBytes) + tailHeapRoom, true
}
