package scootgate_test

import (
	"bytes"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// The repository stands on its own: its Markdown links resolve, and
// nothing in it sends a reader to a document that does not ship with it
// (docs/README.md is the index of the reference).

// TestMarkdownLinks fails when a relative link in a tracked Markdown file
// names a file that does not exist, leaves the repository, or names a
// #fragment that is no heading of the target page (GitHub's slugs).
func TestMarkdownLinks(t *testing.T) {
	files := trackedFiles(t)
	n := 0
	for _, f := range files {
		if !strings.HasSuffix(f, ".md") {
			continue
		}
		n++
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range checkMarkdownLinks(f, data, os.ReadFile) {
			t.Error(p)
		}
	}
	if n < 10 {
		t.Fatalf("found only %d Markdown files; is the file list broken?", n)
	}
}

// TestNoOutsideCitations fails when a tracked file cites a document that
// is not in the repository: the product specification's sections, the
// research notes, seed files, a style guide, or issue numbers. Cite the
// page and section in docs/ instead (`docs/api.md "Streams"`), or say why.
func TestNoOutsideCitations(t *testing.T) {
	files := trackedFiles(t)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.IndexByte(data, 0) >= 0 {
			continue // binary
		}
		for _, p := range outsideCitations(f, data) {
			t.Error(p)
		}
	}
}

// TestDocCitations fails when a tracked file cites a docs/ page that does
// not exist, or a section (`docs/api.md "Streams"`) that is no heading of
// that page, so a renamed heading cannot leave citations behind.
func TestDocCitations(t *testing.T) {
	files := trackedFiles(t)
	headings := map[string][]string{}
	for _, f := range files {
		if strings.HasPrefix(f, "docs/") && strings.HasSuffix(f, ".md") {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			headings[f] = headingTexts(data)
		}
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.IndexByte(data, 0) >= 0 {
			continue
		}
		for _, p := range checkDocCitations(f, data, headings) {
			t.Error(p)
		}
	}
}

// trackedFiles lists the repository's files, relative to its root (the
// test's working directory): git's list when git can answer, else every
// file outside .git.
func trackedFiles(t *testing.T) []string {
	t.Helper()
	if out, err := exec.Command("git", "ls-files", "-z").Output(); err == nil && len(out) > 0 {
		var files []string
		for _, f := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
			if _, err := os.Stat(f); err == nil { // deleted but not yet staged
				files = append(files, f)
			}
		}
		return files
	}
	var files []string
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			files = append(files, filepath.ToSlash(p))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

var (
	// [text](target "title") and ![alt](target); the target may be <quoted>.
	inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(\s*(<[^>]*>|[^)\s]*)[^)]*\)`)
	// [label]: target
	refLink   = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)`)
	codeSpan  = regexp.MustCompile("`+[^`]*`+")
	htmlID    = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
	atxHeader = regexp.MustCompile(`^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)
)

// checkMarkdownLinks returns one problem per broken relative link in the
// Markdown file name (a slash path relative to the repository root).
func checkMarkdownLinks(name string, data []byte, read func(string) ([]byte, error)) []string {
	var problems []string
	for i, line := range markdownProse(data) {
		if line == "" {
			continue
		}
		var targets []string
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			targets = append(targets, m[1])
		}
		if m := refLink.FindStringSubmatch(line); m != nil {
			targets = append(targets, m[1])
		}
		for _, target := range targets {
			if p := checkLink(name, strings.Trim(target, "<>"), read); p != "" {
				problems = append(problems, fmt.Sprintf("%s:%d: link %q: %s", name, i+1, target, p))
			}
		}
	}
	return problems
}

// checkLink checks one link target of the file from; "" means fine.
func checkLink(from, target string, read func(string) ([]byte, error)) string {
	if target == "" {
		return "empty target"
	}
	if u, err := url.Parse(target); err == nil && u.Scheme != "" {
		return "" // http:, https:, mailto:: not ours to check
	}
	file, frag, _ := strings.Cut(target, "#")
	file, err := url.PathUnescape(file)
	if err != nil {
		return "bad escape: " + err.Error()
	}
	if strings.HasPrefix(file, "/") {
		return "absolute path; use a path relative to this file"
	}
	dest := from
	if file != "" {
		dest = path.Join(path.Dir(from), file)
		if dest == ".." || strings.HasPrefix(dest, "../") {
			return "leaves the repository"
		}
		if _, err := os.Stat(filepath.FromSlash(dest)); err != nil {
			return "no such file " + dest
		}
	}
	if frag == "" || !strings.HasSuffix(dest, ".md") {
		return ""
	}
	data, err := read(filepath.FromSlash(dest))
	if err != nil {
		return err.Error()
	}
	anchors := markdownAnchors(data)
	if !slices.Contains(anchors, frag) {
		return fmt.Sprintf("no heading #%s in %s (it has: %s)", frag, dest, strings.Join(anchors, ", "))
	}
	return ""
}

// markdownProse returns the file's lines with fenced code blocks blanked
// and code spans removed, so that code samples are not read as links.
func markdownProse(data []byte) []string {
	lines := strings.Split(string(data), "\n")
	fence := ""
	for i, line := range lines {
		trimmed := strings.TrimLeft(line, " ")
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			lines[i] = ""
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			lines[i] = ""
			continue
		}
		lines[i] = codeSpan.ReplaceAllString(line, "code")
	}
	return lines
}

// headingTexts returns the text of every ATX heading outside code blocks.
func headingTexts(data []byte) []string {
	var out []string
	lines := strings.Split(string(data), "\n")
	inFence := false
	for _, line := range lines {
		trimmed := strings.TrimLeft(line, " ")
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		if m := atxHeader.FindStringSubmatch(line); m != nil {
			out = append(out, m[2])
		}
	}
	return out
}

// markdownAnchors returns the fragments GitHub gives the page's headings,
// with -1, -2, ... for repeats, plus explicit <a name/id> anchors.
func markdownAnchors(data []byte) []string {
	var out []string
	seen := map[string]int{}
	for _, h := range headingTexts(data) {
		s := slug(h)
		if n := seen[s]; n > 0 {
			out = append(out, fmt.Sprintf("%s-%d", s, n))
		} else {
			out = append(out, s)
		}
		seen[s]++
	}
	for _, m := range htmlID.FindAllStringSubmatch(string(data), -1) {
		out = append(out, m[1])
	}
	return out
}

var (
	mdLinkText = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	mdEmphasis = regexp.MustCompile(`(\*\*|__|\*|~~|` + "`" + `)`)
)

// slug is GitHub's heading anchor: the rendered text, lower-cased, with
// everything but letters, marks, digits, connector punctuation, spaces and
// hyphens removed, and spaces turned into hyphens.
func slug(heading string) string {
	text := mdLinkText.ReplaceAllString(heading, "$1")
	text = mdEmphasis.ReplaceAllString(text, "")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-', unicode.IsLetter(r), unicode.IsMark(r), unicode.IsDigit(r), unicode.Is(unicode.Pc, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// citationPatterns are the ways a text cites a document the repository
// does not ship. In this file only, the lines that define a pattern (they
// call regexp.MustCompile) and the planted examples (marked "// planted")
// are not checked; see ownLines.
var citationPatterns = []struct {
	re   *regexp.Regexp
	what string
}{
	{regexp.MustCompile(`\.\./shared\b`), "a path outside the repository"},
	{regexp.MustCompile(`\bSPEC\b`), "the outside product specification"},
	{regexp.MustCompile(`\bRESEARCH\b`), "an outside research note"},
	{regexp.MustCompile(`\bseeds?/|\bseed [0-9]{3}\b`), "an outside seed file"},
	{regexp.MustCompile(`\bSTYLE(\.md| habit)`), "the outside style guide"},
	{regexp.MustCompile(`\b[Ii]ssue #?[0-9]`), "an issue number"},
	{regexp.MustCompile(`\bcatalogue (case )?[A-Z][0-9]`), "a research catalogue entry"},
	{regexp.MustCompile(`(?:^|[^\w.§])§ ?[0-9]+(?:[^.\d]|$)`), "a bare section number (of which document?)"},
}

// sectionOfStandard matches a § that belongs to a named standard, which
// is not an outside citation: "RFC 9110 §15.5", "MQTT 3.1.1 §3.1.2.9".
var sectionOfStandard = regexp.MustCompile(`(RFC ?[0-9]+|MQTT [0-9.]+|ISO [0-9]+|section)[ ,]*$`)

// outsideCitations returns one problem per line of the file name that
// cites an outside document.
func outsideCitations(name string, data []byte) []string {
	var problems []string
	for i, line := range ownLines(name, data) {
		for _, p := range citationPatterns {
			for _, loc := range p.re.FindAllStringIndex(line, -1) {
				if strings.Contains(p.what, "bare section") && sectionOfStandard.MatchString(line[:loc[0]+1]) {
					continue
				}
				problems = append(problems, fmt.Sprintf("%s:%d: %s (%q): cite the repository's own docs or say why",
					name, i+1, p.what, strings.TrimSpace(line[loc[0]:loc[1]])))
				break
			}
		}
	}
	return problems
}

// ownLines returns the file's lines; for this test file, the lines that
// define citation patterns or hold planted mistakes are blanked.
func ownLines(name string, data []byte) []string {
	lines := strings.Split(string(data), "\n")
	if name != "docs_test.go" {
		return lines
	}
	for i, line := range lines {
		if strings.Contains(line, "regexp.MustCompile(") || strings.HasSuffix(line, "// planted") {
			lines[i] = ""
		}
	}
	return lines
}

var (
	// A comment continuation: the citation may break across lines.
	commentBreak = regexp.MustCompile(`\n[ \t]*(//|#|\*)?[ \t]*`)
	docCitation  = regexp.MustCompile(`\bdocs/([a-z0-9-]+\.md)(?:,? "([^"\n]+)")?`)
)

// checkDocCitations returns one problem per citation in the file name of
// a docs/ page that does not exist or a section it does not have.
func checkDocCitations(name string, data []byte, headings map[string][]string) []string {
	var problems []string
	text := commentBreak.ReplaceAllString(strings.Join(ownLines(name, data), "\n"), " ")
	for _, m := range docCitation.FindAllStringSubmatch(text, -1) {
		page := "docs/" + m[1]
		hs, ok := headings[page]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("%s: cites %s, which does not exist", name, page))
		case m[2] != "" && !slices.Contains(hs, m[2]):
			problems = append(problems, fmt.Sprintf("%s: cites %s %q, which is no heading there (headings: %s)",
				name, page, m[2], strings.Join(hs, "; ")))
		}
	}
	return problems
}

// TestCheckersCatchPlantedMistakes plants a broken link, a missing anchor,
// a link out of the repository, outside citations and a dead section
// citation, and checks each checker reports them (and passes clean text).
// plantedSpec is an outside path, spelled in two pieces so that a plain
// grep for outside citations does not find this test.
const plantedSpec = "../../sh" + "ared/SP" + "EC.md"

func TestCheckersCatchPlantedMistakes(t *testing.T) {
	pages := map[string]string{
		"docs/x.md": "# X\n\n## Send state\n\n## Send state\n\n## `Go` traps & more\n", // planted
	}
	read := func(name string) ([]byte, error) {
		if s, ok := pages[filepath.ToSlash(name)]; ok {
			return []byte(s), nil
		}
		return os.ReadFile(name)
	}
	// The planted page exists only in pages: the links below name real
	// files, and read serves the planted page's headings.
	md := strings.Join([]string{
		"[ok](api.md) [ok](api.md#status-codes) [ok](https://example.com/x) [ok](#)",
		"[bad](no-such-file.md)",
		"[bad](api.md#no-such-heading)",
		"[bad](" + plantedSpec + ")", // planted
		"```",
		"[not a link, code](nowhere.md)",
		"```",
		"`[not a link, code](nowhere.md)`",
		"[ref]: missing/ref.md",
	}, "\n")
	got := checkMarkdownLinks("docs/README.md", []byte(md), read)
	want := []string{"no-such-file.md", "api.md#no-such-heading", plantedSpec, "missing/ref.md"} // planted
	if len(got) != len(want) {
		t.Fatalf("link problems:\n%s\nwant one each for %q", strings.Join(got, "\n"), want)
	}
	for i, w := range want {
		if !strings.Contains(got[i], w) {
			t.Errorf("problem %d = %q, want it to name %q", i, got[i], w)
		}
	}

	if a := markdownAnchors([]byte(pages["docs/x.md"])); !slices.Equal(a, []string{"x", "send-state", "send-state-1", "go-traps--more"}) { // planted
		t.Errorf("anchors = %q", a)
	}

	bad := []string{
		"// see SP" + "EC §6",                         // planted
		"// (RESEARCH" + "-reliability §0 finding 9)", // planted
		"# the original notes are in seeds/003.txt",   // planted
		"// (STYLE habit 3)",                          // planted
		"// fixed in issue 7",                         // planted
		"// catalogue A13",                            // planted
		"// (§11 \"Usage\")",                          // planted
		"see ../sh" + "ared/x.md",                     // planted
	}
	for _, line := range bad {
		if p := outsideCitations("x.go", []byte(line)); len(p) == 0 {
			t.Errorf("%q: no problem reported", line)
		}
	}
	good := []string{
		"// docs/failures.md \"Send state\"",
		"// RFC 9112 §6.3 says the server MUST close", // planted
		"// MQTT 3.1.1 §3.1.2.9",                      // planted
		"// RFC 9110, section §9.3.6",                 // planted
		"dirs := os.Getenv(\"INSPECT_CORPUS\")",       // planted
		"// TestPahoIssue563 reproduces paho.mqtt.golang#563",
	}
	for _, line := range good {
		if p := outsideCitations("x.go", []byte(line)); len(p) != 0 {
			t.Errorf("%q: %v", line, p)
		}
	}

	headings := map[string][]string{"docs/x.md": headingTexts([]byte(pages["docs/x.md"]))}  // planted
	cites := "// (docs/x.md \"Send state\") docs/x.md\n// docs/x.md\n// \"Gone\" docs/y.md" // planted
	if p := checkDocCitations("a.go", []byte(cites), headings); len(p) != 2 ||
		!strings.Contains(p[0], `"Gone"`) || !strings.Contains(p[1], "docs/y.md") { // planted
		t.Errorf("doc citation problems = %q, want the missing section and the missing page", p)
	}
}

// TestPerformancePageStaysAReference: docs/performance.md holds the
// method, the latest results and how to reproduce them, not a diary of
// every run (the git history keeps those); a page past 400 lines has
// started to become one again.
func TestPerformancePageStaysAReference(t *testing.T) {
	data, err := os.ReadFile("docs/performance.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(data, []byte("\n")); n > 400 {
		t.Errorf("docs/performance.md has %d lines, want at most 400: keep the latest results, move the rest to the git history", n)
	}
}
