package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// TestDocsCommandsExist keeps README.md and docs/*.md true to the command
// line: every millrace command in their shell blocks (```sh, ```bash,
// ```console, and the "$ " lines of plain ``` blocks) names a command that
// exists, with flags that command has; so does every line of a plain block
// that begins with millrace (a synopsis: placeholders and [alternatives]
// allowed), and every `millrace ...` code span of the prose. Program output
// goes in ```text blocks, which are not read.
// Lines that do not run millrace are skipped, deliberately: other tools'
// flags are not this test's business.
func TestDocsCommandsExist(t *testing.T) {
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{"../../README.md"}, files...)
	root := newRoot(&env{stdout: io.Discard, stderr: io.Discard})
	root.InitDefaultHelpCmd()
	checked := 0
	for _, file := range files {
		text, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(file, "../../")
		for _, c := range append(docCommands(string(text)), inlineCommands(string(text))...) {
			checked++
			check := checkCommandLine
			if c.synopsis {
				check = checkSynopsis
			}
			if err := check(root, c.args); err != nil {
				t.Errorf("%s:%d: %s\n\t%s", name, c.line, err, c.text)
			}
		}
	}
	if checked < 50 {
		t.Errorf("only %d millrace commands found in the docs: is the parser broken?", checked)
	}
}

// docCommand is one millrace command line found in a document.
type docCommand struct {
	line int      // 1-based line of the document where the command starts
	text string   // the shell line, continuations joined
	args []string // the words after the program name
	// synopsis marks a line of a plain block that is not a shell line
	// ("millrace acl add ... [--topic T | --group G]"): its words name a
	// command, and its flags are what "-x" and "--name" words it holds.
	synopsis bool
}

var (
	fence   = regexp.MustCompile("^\\s*```+\\s*([A-Za-z]*)")
	heredoc = regexp.MustCompile(`<<-?\s*['"]?([A-Za-z_]+)['"]?`)
)

// docCommands finds the millrace command lines of a Markdown document's
// shell blocks.
func docCommands(doc string) []docCommand {
	var out []docCommand
	lines := strings.Split(doc, "\n")
	inBlock, lang, endHeredoc := false, "", ""
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if m := fence.FindStringSubmatch(line); m != nil {
			inBlock, lang = !inBlock, m[1]
			continue
		}
		if !inBlock {
			continue
		}
		if endHeredoc != "" {
			if strings.TrimSpace(line) == endHeredoc {
				endHeredoc = ""
			}
			continue
		}
		start := i
		text := strings.TrimSpace(line)
		prompt := strings.HasPrefix(text, "$ ")
		switch lang {
		case "sh", "bash", "shell":
			text = strings.TrimPrefix(text, "$ ")
		case "console":
			if !prompt {
				continue // output
			}
			text = strings.TrimPrefix(text, "$ ")
		case "":
			if !prompt {
				if words := strings.Fields(text); len(words) > 0 {
					if args, ok := millraceArgs(words[:1]); ok {
						out = append(out, docCommand{line: start + 1, text: text, args: append(args, words[1:]...), synopsis: true})
					}
				}
				continue
			}
			text = strings.TrimPrefix(text, "$ ")
		default:
			continue
		}
		for strings.HasSuffix(text, `\`) && i+1 < len(lines) {
			i++
			text = strings.TrimSuffix(text, `\`) + " " + strings.TrimSpace(lines[i])
		}
		if m := heredoc.FindStringSubmatch(text); m != nil {
			endHeredoc = m[1]
		}
		if strings.HasPrefix(text, "#") {
			continue
		}
		for _, segment := range shellSegments(text) {
			if args, ok := millraceArgs(segment); ok {
				out = append(out, docCommand{line: start + 1, text: text, args: args})
			}
		}
	}
	return out
}

// shellSegments splits a shell line into its simple commands' words: at
// |, ||, &&, ; and &, outside quotes, with quotes removed and comments
// dropped. Command substitutions stay inside their word.
func shellSegments(line string) [][]string {
	var segments [][]string
	var words []string
	var word strings.Builder
	inWord := false
	endWord := func() {
		if inWord {
			words = append(words, word.String())
		}
		word.Reset()
		inWord = false
	}
	endSegment := func() {
		endWord()
		if len(words) > 0 {
			segments = append(segments, words)
		}
		words = nil
	}
	depth := 0 // inside $( )
	for i := 0; i < len(line); i++ {
		ch := line[i]
		switch {
		case ch == '\'' && depth == 0:
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				j = len(line) - i - 1
			}
			word.WriteString(line[i+1 : i+1+j])
			inWord = true
			i += j + 1
		case ch == '"' && depth == 0:
			j := i + 1
			for j < len(line) && line[j] != '"' {
				if line[j] == '\\' {
					j++
				}
				j++
			}
			word.WriteString(line[i+1 : min(j, len(line))])
			inWord = true
			i = j
		case ch == '\\' && i+1 < len(line):
			word.WriteByte(line[i+1])
			inWord = true
			i++
		case ch == '$' && i+1 < len(line) && line[i+1] == '(':
			depth++
			word.WriteString("$(")
			inWord = true
			i++
		case ch == ')' && depth > 0:
			depth--
			word.WriteByte(ch)
		case depth > 0:
			word.WriteByte(ch)
		case ch == '#' && !inWord:
			endSegment()
			return segments
		case ch == ' ' || ch == '\t':
			endWord()
		case ch == '|' || ch == '&' || ch == ';':
			endSegment()
		case ch == '<' || ch == '>':
			// A redirection's target is not an argument.
			endWord()
			for i+1 < len(line) && (line[i+1] == '>' || line[i+1] == '&' || line[i+1] == '<') {
				i++
			}
			for i+1 < len(line) && line[i+1] == ' ' {
				i++
			}
			for i+1 < len(line) && line[i+1] != ' ' {
				i++
			}
		default:
			word.WriteByte(ch)
			inWord = true
		}
	}
	endSegment()
	return segments
}

// millraceArgs returns the arguments of a simple command that runs
// millrace (millrace, bin/millrace, ./bin/millrace or an absolute path
// ending in /millrace), after any VAR=value assignments and wrappers such as sudo.
func millraceArgs(words []string) ([]string, bool) {
	for len(words) > 0 {
		w := words[0]
		switch {
		case strings.Contains(w, "=") && !strings.HasPrefix(w, "-"):
			words = words[1:]
		case w == "sudo" || w == "exec" || w == "time" || w == "nohup" || w == "env":
			words = words[1:]
		case w == "millrace" || w == "bin/millrace" || w == "./bin/millrace" || strings.HasPrefix(w, "/") && strings.HasSuffix(w, "/millrace"):
			return words[1:], true
		default:
			return nil, false
		}
	}
	return nil, false
}

// checkCommandLine reports a command path that does not exist, or a flag
// its command does not have.
func checkCommandLine(root *cobra.Command, args []string) error {
	cmd, rest, err := root.Find(args)
	if err != nil {
		return err
	}
	flags := cmd.Flags()
	flags.AddFlagSet(cmd.InheritedFlags())
	positional := 0
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		switch {
		case a == "--":
			i = len(rest)
		case isHelpFlag(a):
		case strings.HasPrefix(a, "--"):
			name, _, hasValue := strings.Cut(a[2:], "=")
			f := flags.Lookup(name)
			if f == nil {
				return fmt.Errorf("%s has no flag --%s", cmd.CommandPath(), name)
			}
			if !hasValue && f.NoOptDefVal == "" {
				i++ // its value
			}
		case strings.HasPrefix(a, "-") && len(a) > 1:
			for j := 1; j < len(a); j++ {
				f := flags.ShorthandLookup(a[j : j+1])
				if f == nil {
					return fmt.Errorf("%s has no flag -%s", cmd.CommandPath(), a[j:j+1])
				}
				if f.NoOptDefVal == "" {
					if j == len(a)-1 {
						i++ // its value is the next word
					}
					break
				}
			}
		default:
			positional++
		}
	}
	// A word after a command with subcommands, or after the root, is an
	// unknown command.
	if cmd.HasSubCommands() && positional > 0 && cmd.Name() != "help" {
		return fmt.Errorf("%s has no command %q", cmd.CommandPath(), firstPositional(rest, flags))
	}
	return nil
}

// firstPositional is the first word of args that is neither a flag nor a
// flag's value.
func firstPositional(args []string, flags *pflag.FlagSet) string {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			return a
		}
		if name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "="); !hasValue {
			if f := flags.Lookup(name); f != nil && f.NoOptDefVal == "" {
				i++
			}
		}
	}
	return ""
}

var synopsisFlag = regexp.MustCompile(`(?:^|[\s\[(|])(--?[A-Za-z][\w-]*)`)

// checkSynopsis checks a synopsis line: its leading words name a command,
// and every flag it mentions exists on that command. A placeholder where a
// command goes (COMMAND, <command>) stands for any; alternatives
// (produce|consume) must each exist and have the flags.
func checkSynopsis(root *cobra.Command, args []string) error {
	cmd := root
	i := 0
	for ; i < len(args); i++ {
		sub, _, err := cmd.Find(args[i : i+1])
		if err != nil || sub == cmd {
			break
		}
		cmd = sub
	}
	if i < len(args) && cmd.HasSubCommands() && !strings.HasPrefix(args[i], "-") {
		word := args[i]
		if strings.ToUpper(word) == word || strings.HasPrefix(word, "<") {
			return nil // a placeholder
		}
		if !strings.Contains(word, "|") {
			return fmt.Errorf("%s has no command %q", cmd.CommandPath(), word)
		}
		for _, alt := range strings.Split(word, "|") {
			sub, _, err := cmd.Find([]string{alt})
			if err != nil || sub == cmd {
				return fmt.Errorf("%s has no command %q", cmd.CommandPath(), alt)
			}
			if err := checkSynopsisFlags(sub, args[i+1:]); err != nil {
				return err
			}
		}
		return nil
	}
	return checkSynopsisFlags(cmd, args[i:])
}

// checkSynopsisFlags checks that every flag the words mention exists on cmd.
func checkSynopsisFlags(cmd *cobra.Command, words []string) error {
	flags := cmd.Flags()
	flags.AddFlagSet(cmd.InheritedFlags())
	for _, m := range synopsisFlag.FindAllStringSubmatch(strings.Join(words, " "), -1) {
		name := m[1]
		if isHelpFlag(name) {
			continue
		}
		if long, ok := strings.CutPrefix(name, "--"); ok {
			if flags.Lookup(long) == nil {
				return fmt.Errorf("%s has no flag %s", cmd.CommandPath(), name)
			}
		} else if flags.ShorthandLookup(name[1:2]) == nil || len(name) > 2 {
			return fmt.Errorf("%s has no flag %s", cmd.CommandPath(), name)
		}
	}
	return nil
}

// isHelpFlag: cobra adds -h/--help to every command when it runs one.
func isHelpFlag(word string) bool { return word == "--help" || word == "-h" }

var inlineCommand = regexp.MustCompile("`((?:\\./)?(?:bin/)?millrace [^`]+)`")

// inlineCommands finds the millrace commands of a document's prose, in
// code spans (`millrace topic create applogs`), read as synopses.
func inlineCommands(doc string) []docCommand {
	var out []docCommand
	inBlock := false
	for i, line := range strings.Split(doc, "\n") {
		if fence.MatchString(line) {
			inBlock = !inBlock
			continue
		}
		if inBlock {
			continue
		}
		for _, m := range inlineCommand.FindAllStringSubmatch(line, -1) {
			words := strings.Fields(m[1])
			if args, ok := millraceArgs(words[:1]); ok {
				out = append(out, docCommand{line: i + 1, text: m[1], args: append(args, words[1:]...), synopsis: true})
			}
		}
	}
	return out
}

// TestDocsCheckerFindsErrors: the checker of TestDocsCommandsExist finds
// a wrong command or flag in each kind of block and in the prose's code
// spans, and reads neither output nor here-documents nor other programs.
func TestDocsCheckerFindsErrors(t *testing.T) {
	doc := "text millrace nosuch in prose\n" +
		"```sh\n" +
		"bin/millrace topic create x --partitons 3\n" + // 3: misspelt flag
		"./bin/millrace topc list\n" + // 4: no such command
		"echo hi | millrace produce t -K : -z gzip && millrace consume t -x\n" + // 5: no -x
		"kcat -b x -t y -X nosuch=1\n" +
		"cat > f <<'EOF'\nmillrace nosuch\nEOF\n" +
		"MILLRACE_BROKERS=h:1 millrace topic \\\n  describe t --nope\n" + // 10: continued line
		"```\n" +
		"```console\n$ millrace group list -g x\nmillrace output line\n```\n" + // 14
		"```\nmillrace acl add --allow-principal P [--topic T | --grup G]\nmillrace topic create|lst\n$ millrace version\n```\n" + // 18, 19
		"```text\nmillrace dev is up\n```\n" +
		"Prose: `millrace COMMAND --help`, `millrace bench produce|consume -n 5`, `millrace bench produce|nosuch`.\n" + // 25
		"And `bin/millrace topic list --nope`, `millrace nosuch` and `millrace top --once`.\n" // 26, 26
	root := newRoot(&env{stdout: io.Discard, stderr: io.Discard})
	var failed []int
	for _, c := range append(docCommands(doc), inlineCommands(doc)...) {
		check := checkCommandLine
		if c.synopsis {
			check = checkSynopsis
		}
		if err := check(root, c.args); err != nil {
			failed = append(failed, c.line)
		}
	}
	if want := []int{3, 4, 5, 10, 14, 18, 19, 25, 26, 26}; !slices.Equal(failed, want) {
		t.Errorf("lines found wrong: %v, want %v", failed, want)
	}
}
