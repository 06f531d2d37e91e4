// Package cli implements the millrace command line: one binary whose first
// argument picks the part to run (broker, agents, sinks) or the client command
// to execute (topics, produce, consume, groups, benchmarks).
//
// The commands are a cobra tree with pflag flags (POSIX short flags,
// --flag=value, positional arguments anywhere between flags). The client
// flags (-b/--brokers, --tls*, --sasl-*; see clientflags.go) are persistent
// flags of the root, so every command inherits them and they may come
// before or after the command's name.
//
// Adding a command: write pipeline/cli/NAME.go with
//
//	func init() { addCommand("topic", topicCreateCommand) }
//
//	func topicCreateCommand(e *env) *cobra.Command {
//		cmd := &cobra.Command{
//			Use:   "create NAME --partitions N",  // name, then the rest of the usage line
//			Short: "create a topic",               // one line for `millrace help` and completion
//			Args:  exactArgs(1),                   // or anyArgs; errors are usage errors
//		}
//		partitions := cmd.Flags().IntP("partitions", "p", -1, "number of partitions")
//		cmd.RunE = func(cmd *cobra.Command, args []string) error {
//			adm, done, err := e.newAdmin(cmd.Context()) // carries -b, TLS and SASL
//			...
//		}
//		return cmd
//	}
//
// The first argument of addCommand is the parent word ("" for a top-level
// command); a parent that does not exist yet is created, so `millrace user add`
// is addCommand("user", ...). A new top-level word goes in one of the
// groups of `millrace help` (commandGroups in help.go). A flag that rpk or
// kcat users know by a letter takes the letter shortflags.go lists, the same
// on every command; a positional TOPIC or GROUP of an existing one is named
// in namedArgs (complete.go) so that the shell completes it.
//
// Clients come from e.newClient and e.newAdmin; components with clients of
// their own get e.client.settings(), or e.client.applyTo(&cfg.Security)
// where a --config file may set tls: and sasl: too. Return usageError(...)
// for a wrongly called command (exit 2, the usage line follows the error),
// any other error for a failure (exit 1); either is printed as one line. A
// command that makes no Kafka client (a server, a local file tool) sets
// Annotations: noClient, so its help leaves the client flags out and giving
// one is an error. Fault-injection flags for tests are hidden with
// cmd.Flags().MarkHidden. A command line printed for the user to run names
// the binary as e.self (see invocation), not "millrace".
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"millrace/pipeline/monitor"
)

// env carries the process's standard streams and the parsed client flags to
// the commands, so commands can be tested in-process.
type env struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	// client holds the root's persistent client flags once parsed.
	client *clientFlags
	// self is how to run this binary again, for printed command lines
	// (see invocation).
	self string
}

// builder makes one command of a fresh tree; Main builds the tree anew for
// every run, so no flag value outlives it.
type builder struct {
	parent string
	build  func(e *env) *cobra.Command
}

// builders is filled by each command file's init, so the list lives beside
// the code.
var builders []builder

// addCommand registers a command under parent ("" for top level).
func addCommand(parent string, build func(e *env) *cobra.Command) {
	builders = append(builders, builder{parent: parent, build: build})
}

// noClient is the annotation of commands that make no Kafka client.
var noClient = map[string]string{"millrace.client": "none"}

func isClient(cmd *cobra.Command) bool {
	for c := cmd; c != nil; c = c.Parent() {
		if c.Annotations["millrace.client"] == "none" {
			return false
		}
	}
	return true
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

// unknownCommand is a command name that names nothing: one line, exit 2,
// without a usage line (the list of commands would bury it).
type unknownCommand struct{ name, self string }

func (u unknownCommand) Error() string {
	return fmt.Sprintf("unknown command %q (try: %s help)", u.name, u.self)
}

// exactArgs wants n positional arguments.
func exactArgs(n int) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != n {
			return usageError("expected %d argument(s), got %d", n, len(args))
		}
		return nil
	}
}

// anyArgs takes any number of positional arguments.
var anyArgs = cobra.ArbitraryArgs

// Main runs the command named by args and returns the process exit code:
// 0 on success or help, 1 when the command failed, 2 when it was called
// wrongly. Errors are one line on stderr.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	e := &env{stdin: stdin, stdout: stdout, stderr: stderr, self: invocation(os.Args[0])}
	root := newRoot(e)
	if len(args) == 0 {
		printUsage(stderr, root)
		return 2
	}
	// Before cobra parses: pflag may read a long flag given one dash as
	// one-letter flags without an error.
	if cmd, _, err := root.Find(args); err == nil {
		if err := singleDashLong(cmd, args); err != nil {
			return report(stderr, cmd, err)
		}
	}
	root.SetArgs(args)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return 0
	}
	return report(stderr, cmd, err)
}

// report prints the error of cmd as one line and returns the exit code.
func report(stderr io.Writer, cmd *cobra.Command, err error) int {
	name := "millrace"
	if n := commandName(cmd); n != "" {
		name += " " + n
	}
	var unknown unknownCommand
	switch {
	case errors.As(err, &unknown):
		fmt.Fprintf(stderr, "millrace: %v\n", err)
		return 2
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "%s: %v\n%s", name, err, usageLines(cmd))
		return 2
	default:
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		var coded interface{ ExitCode() int }
		if errors.As(err, &coded) {
			return coded.ExitCode()
		}
		return 1
	}
}

// newRoot builds the command tree.
func newRoot(e *env) *cobra.Command {
	root := &cobra.Command{
		Use:           "millrace",
		Short:         "the millrace pipeline appliance: broker, agents, sinks and client commands",
		Args:          anyArgs,
		SilenceErrors: true, // Main prints one line instead
		SilenceUsage:  true,
		// A root without a run function would answer an unknown command
		// with its help and exit 0.
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError("no command given")
			}
			return unknownCommand{args[0], e.self}
		},
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := e.client.envErr; err != nil {
				return usageError("%v", err)
			}
			if !isClient(cmd) {
				var given string
				cmd.Root().PersistentFlags().VisitAll(func(f *pflag.Flag) {
					if given == "" && f.Changed && cmd.Flags().Lookup(f.Name) == f {
						given = f.Name
					}
				})
				if given != "" {
					return usageError("unknown flag: --%s (%s makes no Kafka client)", given, commandName(cmd))
				}
			}
			return nil
		},
	}
	root.SetOut(e.stdout) // completion scripts
	root.SetErr(e.stderr)
	root.SetHelpFunc(func(cmd *cobra.Command, _ []string) { printHelp(e.stderr, cmd) })
	root.SetUsageFunc(func(cmd *cobra.Command) error { printHelp(e.stderr, cmd); return nil })
	root.SetFlagErrorFunc(flagError)
	root.CompletionOptions.HiddenDefaultCmd = true
	e.client = newClientFlags(root.PersistentFlags())

	groups := map[string]*cobra.Command{}
	for _, b := range builders {
		parent := root
		if b.parent != "" {
			if parent = groups[b.parent]; parent == nil {
				parent = groupCommand(e, b.parent)
				groups[b.parent] = parent
				root.AddCommand(parent)
			}
		}
		parent.AddCommand(b.build(e))
	}
	for _, g := range groups {
		var names []string
		for _, c := range g.Commands() {
			names = append(names, c.Name())
		}
		g.Short = g.Name() + " " + strings.Join(names, "|")
	}
	root.AddCommand(completionCommand(e))
	groupCommands(root)
	completeNames(e, root)
	// cobra answers --version before running anything, with the same
	// line as the version command.
	root.Version = Version
	root.Flags().Bool("version", false, "print the version")
	root.SetVersionTemplate("millrace {{.Version}}\n")
	root.SetGlobalNormalizationFunc(flagAliases)
	return root
}

// flagError makes a flag parsing error a usage error. Go's flag package
// read -name as a long flag; pflag reads it as one-letter flags, so a
// single-dash word gets a hint.
func flagError(_ *cobra.Command, err error) error {
	msg := err.Error()
	if _, word, ok := strings.Cut(msg, "unknown shorthand flag: "); ok {
		if _, arg, ok := strings.Cut(word, " in -"); ok && len(arg) > 1 {
			name, _, _ := strings.Cut(arg, "=")
			msg += fmt.Sprintf(" (long flags take two dashes: --%s)", name)
		}
	}
	return usageError("%s", msg)
}

// groupCommand is the first word of two-word commands ("topic" of
// "topic create"); alone, or before an unknown word, it is a usage error.
func groupCommand(e *env, name string) *cobra.Command {
	return &cobra.Command{
		Use:  name + " <command>",
		Args: anyArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError("missing command after %q", name)
			}
			return unknownCommand{name + " " + args[0], e.self}
		},
	}
}

func completionCommand(e *env) *cobra.Command {
	return &cobra.Command{
		Use:         "completion bash|zsh|fish",
		Short:       "print the shell completion script (e.g. source <(millrace completion bash))",
		Args:        exactArgs(1),
		ValidArgs:   []string{"bash", "zsh", "fish"},
		Annotations: noClient,
		RunE: func(cmd *cobra.Command, args []string) error {
			switch args[0] {
			case "bash":
				return cmd.Root().GenBashCompletionV2(e.stdout, true)
			case "zsh":
				return cmd.Root().GenZshCompletion(e.stdout)
			case "fish":
				return cmd.Root().GenFishCompletion(e.stdout, true)
			}
			return usageError("no completion for shell %q: bash, zsh or fish", args[0])
		},
	}
}

// commandName is the command's path without "millrace " ("topic create").
func commandName(cmd *cobra.Command) string {
	if cmd == nil {
		return ""
	}
	return strings.TrimPrefix(strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()), " ")
}

// keyValues is a repeatable k=v flag; unlike pflag's map flags it does not
// split at commas, so a value may hold them (listeners=A://x,B://y).
type keyValues map[string]string

func (kv keyValues) String() string { return fmt.Sprint(map[string]string(kv)) }

// Type names the value in help when the usage text quotes none.
func (kv keyValues) Type() string { return "key=value" }

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

// newClient makes a franz-go client for the seed brokers of -b, with the
// TLS and SASL of the client flags, plus opts.
func (e *env) newClient(opts ...kgo.Opt) (*kgo.Client, error) {
	s := e.client.seeds()
	if len(s) == 0 {
		return nil, usageError("no brokers given")
	}
	auth, err := e.client.settings()
	if err != nil {
		return nil, err
	}
	authOpts, err := auth.Opts()
	if err != nil {
		return nil, err
	}
	base := append(monitor.ClientOpts(), kgo.SeedBrokers(s...), kgo.ClientID("millrace-cli"))
	return kgo.NewClient(append(append(base, authOpts...), opts...)...)
}

// newAdmin makes an admin client and checks that a broker answers, so a wrong
// address fails fast with one clear line instead of retrying forever.
func (e *env) newAdmin(ctx context.Context) (*kadm.Client, func(), error) {
	cl, err := e.newPingedClient(ctx)
	if err != nil {
		return nil, nil, err
	}
	return kadm.NewClient(cl), cl.Close, nil
}

// newPingedClient is newAdmin's client, for commands that also send
// requests to a chosen broker.
func (e *env) newPingedClient(ctx context.Context) (*kgo.Client, error) {
	cl, err := e.newClient()
	if err != nil {
		return nil, err
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := monitor.Ping(pingCtx, cl); err != nil {
		cl.Close()
		return nil, fmt.Errorf("cannot reach brokers %s: %w", e.client.brokers, err)
	}
	return cl, nil
}
