package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// This file is the flag layer commands used before the cobra tree: a
// command registered with register parses its own arguments with the
// standard flag package. It goes once every command is a cobra command.

// register adds a command that parses its own arguments; name is one or two
// words ("topic create"), usage its usage line.
func register(name, usage string, run func(ctx context.Context, e env, args []string) error) {
	parent, _, _ := strings.Cut(name, " ")
	if parent == name {
		parent = ""
	}
	addCommand(parent, func(e *env) *cobra.Command {
		return &cobra.Command{
			Use:                strings.TrimPrefix(usage, parent+" "),
			DisableFlagParsing: true,
			RunE: func(cmd *cobra.Command, args []string) error {
				err := run(cmd.Context(), *e, args)
				if h := (*helpRequest)(nil); errors.As(err, &h) {
					fmt.Fprintf(e.stderr, "usage: %s\n", usageLine(cmd))
					if h.listing != "" {
						fmt.Fprintf(e.stderr, "\nflags:\n%s", h.listing)
					}
					return nil
				}
				return err
			},
		}
	})
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

// helpRequest is what parse returns for -h or --help: it carries the flags'
// descriptions, which are printed under the usage line.
type helpRequest struct{ listing string }

func (h *helpRequest) Error() string { return flag.ErrHelp.Error() }

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

// listing describes every flag that has a usage text, in name order.
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
		def = defaultBrokers
	}
	p := f.String("brokers", def, "seed brokers, comma-separated")
	f.StringVar(p, "b", def, "seed brokers (shorthand)")
	f.shorthands["brokers"] = "b"
	return p
}

// newClient makes a franz-go client for the seed brokers plus opts.
func newClient(brokers string, opts ...kgo.Opt) (*kgo.Client, error) {
	e := env{client: &clientFlags{brokers: brokers}}
	return e.newClient(opts...)
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

func newAdmin(ctx context.Context, brokers string) (*kadm.Client, func(), error) {
	e := env{client: &clientFlags{brokers: brokers}}
	return e.newAdmin(ctx)
}
