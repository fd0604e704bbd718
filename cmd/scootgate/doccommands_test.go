package main

import (
	"bufio"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The command lines the documentation shows are ones the CLI accepts:
// each `scootgate <command> …` line in a code block of README.md,
// docs/*.md and deploy/**/*.md, each inline code span there that runs
// one with flags, and each such line of the other files
// under deploy/ (scripts, units), is run through the real command with
// every file argument pointing into an empty temporary directory, so
// nothing is read or written but the flags and arguments are judged as
// written. Exit status 2 is the CLI's "usage error"; anything else
// (1: a file it could not read) means it took the syntax.

// commandRE finds an invocation: the binary's name (possibly a path, as
// in bin/scootgate or ./cmd/scootgate, possibly quoted), one of the
// commands, and the rest of the line.
var commandRE = regexp.MustCompile(`(?:^|[\s/"'])scootgate["']?\s+(run|check|digest|reset-floor|keygen|sign|version)\b(.*)$`)

// inlineRE finds a Markdown inline code span.
var inlineRE = regexp.MustCompile("`([^`]+)`")

// docCommand is one command line a document shows.
type docCommand struct {
	where string // file:line
	line  string // as written, from the command on
	args  []string
}

// TestDocsShowCommandsTheCLIAccepts: every command line in the docs
// parses (exit status other than 2).
func TestDocsShowCommandsTheCLIAccepts(t *testing.T) {
	cmds := docCommands(t, filepath.Join("..", ".."))
	if len(cmds) < 10 {
		t.Fatalf("found only %d command lines in the docs; is the extraction broken?", len(cmds))
	}
	for _, c := range cmds {
		if code, stderr := dryRun(t, c.args); code == 2 {
			t.Errorf("%s: the CLI refuses %q:\n%s", c.where, c.line, stderr)
		}
	}
}

// TestDocCommandCheckCatchesMistakes: the check above flags the kind of
// line it exists for.
func TestDocCommandCheckCatchesMistakes(t *testing.T) {
	for _, line := range []string{
		"scootgate check --authz old.json new.json",
		"scootgate check --routes a.json --authz b.json",
		"scootgate run --listen :8080",
		"scootgate sign routes.json",
	} {
		args, ok := commandArgs(line)
		if !ok {
			t.Fatalf("%q: not recognised as a command line", line)
		}
		if code, _ := dryRun(t, args); code != 2 {
			t.Errorf("%q: exit %d, want the usage error 2", line, code)
		}
	}
}

// notFile are the flags whose values are no file names: kept as written.
var notFile = map[string]bool{"kind": true, "pprof-listen": true}

// dryRun runs args with every file argument replaced by a path in an
// empty directory, and returns the exit status and stderr.
func dryRun(t *testing.T, args []string) (int, string) {
	t.Helper()
	empty := filepath.Join(t.TempDir(), "missing")
	safe := make([]string, len(args))
	for i, a := range args {
		safe[i] = a
		switch {
		case i == 0: // the command
		case strings.HasPrefix(a, "-"):
			if name, v, ok := strings.Cut(a, "="); ok && !notFile[strings.TrimLeft(name, "-")] {
				safe[i] = name + "=" + filepath.Join(empty, filepath.Base(v))
			}
		case notFile[strings.TrimLeft(args[i-1], "-")]:
		default:
			safe[i] = filepath.Join(empty, filepath.Base(a))
		}
	}
	var stderr strings.Builder
	code := run(safe, strings.NewReader("sk-doc-example\n"), io.Discard, &stderr)
	return code, stderr.String()
}

// docCommands collects the command lines of the docs under root.
func docCommands(t *testing.T, root string) []docCommand {
	t.Helper()
	files := []string{filepath.Join(root, "README.md")}
	md, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, md...)
	err = filepath.WalkDir(filepath.Join(root, "deploy"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(p, ".go") {
			return err
		}
		files = append(files, p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []docCommand
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		markdown := strings.HasSuffix(f, ".md")
		inBlock := false
		sc := bufio.NewScanner(fh)
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			if markdown && strings.HasPrefix(strings.TrimSpace(line), "```") {
				inBlock = !inBlock
				continue
			}
			rel, _ := filepath.Rel(root, f)
			where := rel + ":" + itoa(n)
			if markdown && !inBlock {
				// Prose: the inline code spans that run a command with
				// flags (a bare `scootgate check` names the command).
				for _, span := range inlineRE.FindAllStringSubmatch(line, -1) {
					if args, ok := commandArgs(span[1]); ok && strings.Contains(span[1], " -") {
						out = append(out, docCommand{where: where, line: span[1], args: args})
					}
				}
				continue
			}
			if args, ok := commandArgs(line); ok {
				out = append(out, docCommand{where: where, line: strings.TrimSpace(line), args: args})
			}
		}
		fh.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// commandArgs returns the command and arguments of a line that runs
// scootgate. The line ends at a shell operator, a comment, or a run of
// two spaces (a synopsis's description); a synopsis's optional parts
// ([--previous OLD]) count as written, and of alternatives
// (--routes|--authz) the first.
func commandArgs(line string) ([]string, bool) {
	m := commandRE.FindStringSubmatch(line)
	if m == nil {
		return nil, false
	}
	rest := m[2]
	if strings.Contains(rest, "--$") || strings.Contains(rest, "[@]") {
		return nil, false // flags a shell expands: nothing to judge as written
	}
	for _, stop := range []string{"  ", " #", " |", " >", " <", " &&", " ||", ";", "`", ")", "2>"} {
		if i := strings.Index(rest, stop); i >= 0 {
			rest = rest[:i]
		}
	}
	rest = strings.NewReplacer("[", "", "]", "", `"`, "", "'", "", `\`, "").Replace(rest)
	args := []string{m[1]}
	for _, f := range strings.Fields(rest) {
		if f == "..." {
			continue
		}
		if strings.HasPrefix(f, "-") {
			f, _, _ = strings.Cut(f, "|")
		}
		args = append(args, f)
	}
	return args, true
}

func itoa(n int) string {
	const digits = "0123456789"
	if n < 10 {
		return digits[n : n+1]
	}
	return itoa(n/10) + digits[n%10:n%10+1]
}
