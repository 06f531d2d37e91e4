// Package cli implements the millrace command line: one binary whose first
// argument picks the part to run (broker, agents, sinks) or the client command
// to execute (topics, produce, consume, groups, benchmarks).
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/pipeline/monitor"
)

// env carries the process's standard streams so commands can be tested
// in-process.
type env struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
}

// command is one subcommand: its usage line and its run function, which gets
// the arguments after the command's name.
type command struct {
	usage string
	run   func(ctx context.Context, e env, args []string) error
}

// commands is filled by each command file's init, so the list lives beside
// the code.
var commands = map[string]command{}

func register(name, usage string, run func(ctx context.Context, e env, args []string) error) {
	commands[name] = command{usage: usage, run: run}
}

// errUsage marks an error caused by how the command was called; Main prints
// the command's usage after it.
var errUsage = errors.New("usage")

// usageError formats a message for a wrongly called command; it matches
// errUsage under errors.Is.
func usageError(format string, args ...any) error {
	return &usageErr{msg: fmt.Sprintf(format, args...)}
}

type usageErr struct{ msg string }

func (e *usageErr) Error() string        { return e.msg }
func (e *usageErr) Is(target error) bool { return target == errUsage }

// Main runs the command named by args[0] and returns the process exit code.
// Errors are one line on stderr.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		printUsage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	name := args[0]
	// Two-word commands ("topic create") are registered under both words.
	if len(args) > 1 {
		if _, ok := commands[name+" "+args[1]]; ok {
			name, args = name+" "+args[1], args[1:]
		}
	}
	cmd, ok := commands[name]
	if !ok {
		fmt.Fprintf(stderr, "millrace: unknown command %q (try: millrace help)\n", strings.Join(args[:1], " "))
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := cmd.run(ctx, env{stdin: stdin, stdout: stdout, stderr: stderr}, args[1:])
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprintf(stderr, "usage: millrace %s\n", cmd.usage)
		if h := (*helpRequest)(nil); errors.As(err, &h) && h.listing != "" {
			fmt.Fprintf(stderr, "\nflags:\n%s", h.listing)
		}
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "millrace %s: %v\nusage: millrace %s\n", name, err, cmd.usage)
		return 2
	default:
		fmt.Fprintf(stderr, "millrace %s: %v\n", name, err)
		return 1
	}
}

func printUsage(w io.Writer) {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintln(w, "usage: millrace <command> [flags]\n\ncommands:")
	for _, n := range names {
		fmt.Fprintf(w, "  %s\n", commands[n].usage)
	}
	fmt.Fprintln(w, "\nClient commands take -b/--brokers HOST:PORT[,...] (default 127.0.0.1:9092, env MILLRACE_BROKERS).")
}

// flags is a flag set that also accepts positional arguments between flags
// ("topic create NAME --partitions 3"), as users expect from Kafka's tools.
type flags struct {
	*flag.FlagSet
	shorthands map[string]string // long name -> one-letter alias
}

func newFlags(name string) flags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // Main prints one clear line instead of flag's dump.
	return flags{fs, map[string]string{}}
}

// helpRequest is what parse returns for -h or --help: it matches
// flag.ErrHelp and carries the flags' descriptions, which Main prints under
// the usage line.
type helpRequest struct{ listing string }

func (h *helpRequest) Error() string        { return flag.ErrHelp.Error() }
func (h *helpRequest) Is(target error) bool { return target == flag.ErrHelp }

// parse parses args and returns the positional arguments; want is how many
// are required (-1: any number).
func (f flags) parse(args []string, want int) ([]string, error) {
	var positional []string
	for {
		if err := f.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, &helpRequest{listing: f.listing()}
			}
			return nil, usageError("%v", err)
		}
		args = f.Args()
		if len(args) == 0 {
			break
		}
		positional = append(positional, args[0])
		args = args[1:]
	}
	if want >= 0 && len(positional) != want {
		return nil, usageError("expected %d argument(s), got %d", want, len(positional))
	}
	return positional, nil
}

// listing describes every flag that has a usage text, in name order: the
// flag with its value's type, then the text and any default that is not the
// zero value; a one-letter alias stands beside its long name. Flags without
// a text (fault injection for tests) stay out.
func (f flags) listing() string {
	var b strings.Builder
	aliases := map[string]bool{}
	for _, short := range f.shorthands {
		aliases[short] = true
	}
	f.VisitAll(func(fl *flag.Flag) {
		if fl.Usage == "" || aliases[fl.Name] {
			return
		}
		b.WriteString("  ")
		if short, ok := f.shorthands[fl.Name]; ok {
			fmt.Fprintf(&b, "-%s, ", short)
		}
		typ, usage := flag.UnquoteUsage(fl)
		b.WriteString("--" + fl.Name)
		if typ != "" {
			fmt.Fprintf(&b, " %s", typ)
		}
		fmt.Fprintf(&b, "\n        %s", usage)
		switch fl.DefValue {
		case "", "0", "false", "0s", "map[]":
		default:
			fmt.Fprintf(&b, " (default %s)", fl.DefValue)
		}
		b.WriteString("\n")
	})
	return b.String()
}

// visited reports the flags given on the command line.
func visited(f flags) map[string]bool {
	seen := map[string]bool{}
	f.Visit(func(fl *flag.Flag) { seen[fl.Name] = true })
	return seen
}

// brokers registers -b/--brokers.
func (f flags) brokers() *string {
	def := os.Getenv("MILLRACE_BROKERS")
	if def == "" {
		def = "127.0.0.1:9092"
	}
	p := f.String("brokers", def, "seed brokers, comma-separated")
	f.StringVar(p, "b", def, "seed brokers (shorthand)")
	f.shorthands["brokers"] = "b"
	return p
}

// keyValues is a repeatable k=v flag.
type keyValues map[string]string

func (kv keyValues) String() string { return fmt.Sprint(map[string]string(kv)) }

func (kv keyValues) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("%q is not key=value", s)
	}
	kv[k] = v
	return nil
}

func seeds(brokers string) []string {
	var out []string
	for _, s := range strings.Split(brokers, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// newClient makes a franz-go client for the seed brokers plus opts.
func newClient(brokers string, opts ...kgo.Opt) (*kgo.Client, error) {
	s := seeds(brokers)
	if len(s) == 0 {
		return nil, usageError("no brokers given")
	}
	opts = append(append(monitor.ClientOpts(), kgo.SeedBrokers(s...), kgo.ClientID("millrace-cli")), opts...)
	return kgo.NewClient(opts...)
}

// adminCommand parses the arguments of a client command whose only flag is
// -b/--brokers, wanting want positional arguments, and connects an admin
// client; done closes it.
func adminCommand(ctx context.Context, name string, args []string, want int) (pos []string, adm *kadm.Client, done func(), err error) {
	f := newFlags(name)
	brokers := f.brokers()
	if pos, err = f.parse(args, want); err != nil {
		return nil, nil, nil, err
	}
	if adm, done, err = newAdmin(ctx, *brokers); err != nil {
		return nil, nil, nil, err
	}
	return pos, adm, done, nil
}

// newAdmin makes an admin client and checks that a broker answers, so a wrong
// address fails fast with one clear line instead of retrying forever.
func newAdmin(ctx context.Context, brokers string) (*kadm.Client, func(), error) {
	cl, err := newClient(brokers)
	if err != nil {
		return nil, nil, err
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := monitor.Ping(pingCtx, cl); err != nil {
		cl.Close()
		return nil, nil, fmt.Errorf("cannot reach brokers %s: %w", brokers, err)
	}
	return kadm.NewClient(cl), cl.Close, nil
}
