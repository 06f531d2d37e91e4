package cli

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
)

// completionTimeout bounds how long a Tab waits for the brokers: a
// completion that hangs the shell is worse than none.
const completionTimeout = 2 * time.Second

// namedArgs are the commands whose first argument names an existing topic
// or group, by command name (as commandName gives it).
var namedArgs = map[string]string{
	"consume":        "topic",
	"produce":        "topic",
	"topic describe": "topic",
	"topic delete":   "topic",
	"topic alter":    "topic",
	"group describe": "group",
	"group reset":    "group",
}

// completeNames makes shell completion offer the brokers' topic and group
// names: for the first argument of the commands in namedArgs, and for
// every --topic and --group flag. The brokers are those of -b (or
// MILLRACE_BROKERS) with the client's TLS and SASL; when they cannot be
// asked within completionTimeout there are no completions, and nothing is
// printed into the shell.
func completeNames(e *env, root *cobra.Command) {
	lists := map[string]func(context.Context, *kadm.Client) ([]string, error){
		"topic": listTopicNames,
		"group": listGroupNames,
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if kind, ok := namedArgs[commandName(c)]; ok {
			complete := e.completeFrom(lists[kind])
			c.ValidArgsFunction = func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
				if len(args) > 0 {
					return nil, cobra.ShellCompDirectiveNoFileComp
				}
				return complete(cmd, args, toComplete)
			}
		}
		for name, list := range lists {
			if c.Flags().Lookup(name) != nil {
				// Fails only for a missing flag or a second registration:
				// a bug in this walk.
				if err := c.RegisterFlagCompletionFunc(name, e.completeFrom(list)); err != nil {
					panic(err)
				}
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// completeFrom answers a completion with the names list gives that begin
// with what is typed so far.
func (e *env) completeFrom(list func(context.Context, *kadm.Client) ([]string, error)) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		ctx := cmd.Context()
		if ctx == nil {
			ctx = context.Background()
		}
		ctx, cancel := context.WithTimeout(ctx, completionTimeout)
		defer cancel()
		adm, done, err := e.newAdmin(ctx)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		defer done()
		names, err := list(ctx, adm)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []cobra.Completion
		for _, n := range names {
			if strings.HasPrefix(n, toComplete) {
				out = append(out, n)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

func listTopicNames(ctx context.Context, adm *kadm.Client) ([]string, error) {
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		return nil, err
	}
	return topics.Names(), nil
}

func listGroupNames(ctx context.Context, adm *kadm.Client) ([]string, error) {
	groups, err := adm.ListGroups(ctx)
	if err != nil {
		return nil, err
	}
	names := groups.Groups()
	slices.Sort(names)
	return names, nil
}
