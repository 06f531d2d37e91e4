package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// helpWidth is the width every help line fits in: a terminal's default.
const helpWidth = 80

// commandGroups sort the top-level commands of `millrace help` by purpose,
// as cobra command groups. A new top-level command goes in one of them
// (TestEveryCommandHasAGroup says so); one left out is listed under "Other
// commands" rather than hidden.
var commandGroups = []struct {
	id, title string
	commands  []string
}{
	{"appliance", "Run the appliance and watch it:", []string{"up", "console", "top"}},
	{"broker", "Brokers, topics, records and groups:", []string{"broker", "cluster", "topic", "produce", "consume", "group", "schema"}},
	{"agents", "Agents that feed the broker:", []string{"tail", "beacon", "syslog", "otlp"}},
	{"lake", "Sinks, the lake and the audit:", []string{"sink", "lake", "audit"}},
	{"admin", "Security and administration:", []string{"user", "acl", "quota", "bench", "completion", "version"}},
}

// groupCommands registers the groups on root and puts each top-level
// command in its group.
func groupCommands(root *cobra.Command) {
	groupOf := map[string]string{}
	for _, g := range commandGroups {
		root.AddGroup(&cobra.Group{ID: g.id, Title: g.title})
		for _, name := range g.commands {
			groupOf[name] = g.id
		}
	}
	for _, c := range root.Commands() {
		c.GroupID = groupOf[c.Name()]
	}
	root.SetHelpCommandGroupID("admin")
}

// usageLine is "millrace " and the command's words and usage.
func usageLine(cmd *cobra.Command) string {
	if cmd == nil || !cmd.HasParent() {
		return "millrace <command> [flags]"
	}
	return cmd.Parent().CommandPath() + " " + cmd.Use
}

// usageLines is "usage: " and the usage line, wrapped to helpWidth with
// the continuation lines under the first word after the command.
func usageLines(cmd *cobra.Command) string {
	indent := "       "
	if path := cmd.CommandPath(); cmd.HasParent() && len(path) < 30 {
		indent = strings.Repeat(" ", len("usage: "+path+" "))
	}
	return wrap("usage: ", indent, usageLine(cmd), helpWidth)
}

// printUsage lists the commands by group, each with what it does, then the
// client flags.
func printUsage(w io.Writer, root *cobra.Command) {
	fmt.Fprintln(w, "usage: millrace <command> [flags]")
	fmt.Fprint(w, wrap("", "", "millrace <command> --help shows its flags; millrace --version the version.", helpWidth))
	type entry struct{ name, short string }
	byGroup := map[string][]entry{}
	width := 0
	var walk func(c *cobra.Command, group string)
	walk = func(c *cobra.Command, group string) {
		for _, sub := range c.Commands() {
			if sub.Hidden || sub.Name() == "help" {
				continue
			}
			g := group
			if c == root {
				g = sub.GroupID
			}
			if sub.HasSubCommands() {
				walk(sub, g)
				continue
			}
			name := commandName(sub)
			width = max(width, len(name))
			byGroup[g] = append(byGroup[g], entry{name, sub.Short})
		}
	}
	walk(root, "")
	section := func(title string, entries []entry) {
		if len(entries) == 0 {
			return
		}
		fmt.Fprintf(w, "\n%s\n", title)
		for _, e := range entries {
			first := fmt.Sprintf("  %-*s  ", width, e.name)
			fmt.Fprint(w, wrap(first, strings.Repeat(" ", len(first)), e.short, helpWidth))
		}
	}
	for _, g := range commandGroups {
		section(g.title, byGroup[g.id])
	}
	section("Other commands:", byGroup[""])
	fmt.Fprintf(w, "\nclient flags (every client command; also from the environment, see below):\n%s", flagListing(root.PersistentFlags(), nil))
	fmt.Fprint(w, "\n"+wrap("", "", clientEnvHelp, helpWidth))
}

// printHelp prints a command's usage line, its description and its flags.
func printHelp(w io.Writer, cmd *cobra.Command) {
	if !cmd.HasParent() {
		printUsage(w, cmd)
		return
	}
	fmt.Fprint(w, usageLines(cmd))
	if cmd.HasAvailableSubCommands() { // a group: its commands say the rest
		fmt.Fprintln(w, "\ncommands:")
		for _, sub := range cmd.Commands() {
			if sub.IsAvailableCommand() {
				fmt.Fprintf(w, "  %s\n%s", commandName(sub), wrap("      ", "      ", sub.Short, helpWidth))
			}
		}
		return
	}
	if cmd.Long != "" {
		fmt.Fprint(w, "\n"+wrap("", "", cmd.Long, helpWidth))
	} else if cmd.Short != "" {
		fmt.Fprint(w, "\n"+wrap("", "", cmd.Short, helpWidth))
	}
	if local := flagListing(cmd.LocalFlags(), nil); local != "" {
		fmt.Fprintf(w, "\nflags:\n%s", local)
	}
	if isClient(cmd) {
		// A local flag of the same name (cluster reassign's --brokers)
		// hides the inherited one.
		shadowed := func(f *pflag.Flag) bool { return cmd.LocalFlags().Lookup(f.Name) != nil }
		fmt.Fprintf(w, "\nclient flags (see millrace help for their environment variables):\n%s", flagListing(cmd.Root().PersistentFlags(), shadowed))
	}
}

// flagListing describes every visible flag in name order: the flag with its
// value's type, then the text and any default that is not the zero value,
// with a one-letter alias beside the long name. Hidden flags (fault
// injection for tests), the help flag and those skip reports stay out.
func flagListing(fs *pflag.FlagSet, skip func(*pflag.Flag) bool) string {
	var b strings.Builder
	fs.VisitAll(func(fl *pflag.Flag) {
		if fl.Hidden || fl.Usage == "" || fl.Name == "help" || skip != nil && skip(fl) {
			return
		}
		b.WriteString("  ")
		if fl.Shorthand != "" {
			fmt.Fprintf(&b, "-%s, ", fl.Shorthand)
		}
		typ, usage := pflag.UnquoteUsage(fl)
		b.WriteString("--" + fl.Name)
		if typ != "" {
			fmt.Fprintf(&b, " %s", typ)
		}
		b.WriteString("\n")
		switch fl.DefValue {
		case "", "0", "false", "0s", "[]", "map[]":
		default:
			usage += fmt.Sprintf(" (default %s)", fl.DefValue)
		}
		b.WriteString(wrap("        ", "        ", usage, helpWidth))
	})
	return b.String()
}

// wrap fills text into lines of at most width columns, the first
// beginning with first and the others with indent, each ending in a
// newline. Lines break at spaces outside brackets, so "[--s3-region R]"
// stays whole, unless a bracketed part is wider than a line by itself; a
// word wider than a line stands alone on its line. Newlines in text start
// a new line.
func wrap(first, indent, text string, width int) string {
	var b strings.Builder
	prefix := first
	for i, para := range strings.Split(text, "\n") {
		if i > 0 {
			prefix = indent
		}
		line := prefix
		empty := true
		for _, word := range wrapUnits(para, width-len(indent)) {
			if !empty && len(line)+1+len(word) > width {
				b.WriteString(line + "\n")
				line, empty = indent, true
			}
			if !empty {
				line += " "
			}
			line += word
			empty = false
		}
		b.WriteString(strings.TrimRight(line, " ") + "\n")
		prefix = indent
	}
	return b.String()
}

// wrapUnits splits s at spaces outside (), [] and {}; a unit wider than
// room is split at its own spaces instead.
func wrapUnits(s string, room int) []string {
	var units []string
	depth, start := 0, 0
	flush := func(end int) {
		if u := strings.TrimSpace(s[start:end]); u != "" {
			if len(u) > room {
				units = append(units, strings.Fields(u)...)
			} else {
				units = append(units, u)
			}
		}
		start = end
	}
	for i, r := range s {
		switch r {
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			depth = max(0, depth-1)
		case ' ':
			if depth == 0 {
				flush(i)
			}
		}
	}
	flush(len(s))
	return units
}
