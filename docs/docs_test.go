package docs_test

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"unicode"
)

// root is the repository's root, relative to this package's directory.
const root = ".."

// markdownFiles returns README.md and every docs/*.md, relative to root.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md"}
	more, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range more {
		rel, err := filepath.Rel(root, f)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, filepath.ToSlash(rel))
	}
	return files
}

// doc is a Markdown file split into prose and code.
type doc struct {
	path  string   // relative to root, slash-separated
	prose []line   // lines outside fenced code blocks, code spans removed
	code  []line   // lines of fenced code blocks, and the content of each code span
	heads []string // the headings' anchors, GitHub-style, in order
}

type line struct {
	n    int // 1-based line number
	text string
}

var codeSpan = regexp.MustCompile("(`+)(.+?)(`+)")

func readDoc(t *testing.T, path string) *doc {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(path)))
	if err != nil {
		t.Fatal(err)
	}
	d := &doc{path: path}
	seen := map[string]int{}
	fence := ""
	for i, text := range strings.Split(string(b), "\n") {
		n := i + 1
		trimmed := strings.TrimSpace(text)
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
				continue
			}
			d.code = append(d.code, line{n, text})
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		// Code spans go to code; the prose keeps a blank in their place.
		prose := codeSpan.ReplaceAllStringFunc(text, func(s string) string {
			m := codeSpan.FindStringSubmatch(s)
			if len(m[1]) == len(m[3]) {
				d.code = append(d.code, line{n, m[2]})
			}
			return " "
		})
		d.prose = append(d.prose, line{n, prose})
		if h, ok := heading(text); ok {
			slug := slugify(h)
			if k := seen[slug]; k > 0 {
				seen[slug] = k + 1
				slug = fmt.Sprintf("%s-%d", slug, k)
			} else {
				seen[slug] = 1
			}
			d.heads = append(d.heads, slug)
		}
	}
	return d
}

var atxHeading = regexp.MustCompile(`^ {0,3}#{1,6}[ \t]+(.*?)[ \t#]*$`)

func heading(text string) (string, bool) {
	m := atxHeading.FindStringSubmatch(text)
	if m == nil {
		return "", false
	}
	return m[1], true
}

var (
	mdLink  = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	htmlTag = regexp.MustCompile(`<[^>]+>`)
)

// slugify is GitHub's anchor of a heading: the rendered text in lower case,
// without punctuation other than hyphens and underscores, spaces as hyphens.
func slugify(h string) string {
	h = mdLink.ReplaceAllString(h, "$1")
	h = htmlTag.ReplaceAllString(h, "")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.Is(unicode.Mn, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

var linkTarget = regexp.MustCompile(`\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)`)

// TestLinks checks that every relative link of the docs names a file that
// exists, and every #anchor a heading of its file.
func TestLinks(t *testing.T) {
	docs := map[string]*doc{}
	load := func(p string) *doc {
		if d, ok := docs[p]; ok {
			return d
		}
		d := readDoc(t, p)
		docs[p] = d
		return d
	}
	var broken []string
	for _, p := range markdownFiles(t) {
		d := load(p)
		for _, l := range d.prose {
			for _, m := range linkTarget.FindAllStringSubmatch(l.text, -1) {
				target := m[1]
				if target == "" || strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				file, anchor, _ := strings.Cut(target, "#")
				resolved := p
				if file != "" {
					if strings.HasPrefix(file, "/") {
						broken = append(broken, fmt.Sprintf("%s:%d: %s: absolute path; use a relative one", p, l.n, target))
						continue
					}
					resolved = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(p), file)))
					if resolved == ".." || strings.HasPrefix(resolved, "../") {
						broken = append(broken, fmt.Sprintf("%s:%d: %s: outside the repository", p, l.n, target))
						continue
					}
					if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(resolved))); err != nil {
						broken = append(broken, fmt.Sprintf("%s:%d: %s: no file %s", p, l.n, target, resolved))
						continue
					}
				}
				if anchor == "" {
					continue
				}
				if !strings.HasSuffix(resolved, ".md") {
					broken = append(broken, fmt.Sprintf("%s:%d: %s: an anchor into a file that is not Markdown", p, l.n, target))
					continue
				}
				if !slices.Contains(load(resolved).heads, anchor) {
					broken = append(broken, fmt.Sprintf("%s:%d: %s: no heading #%s in %s", p, l.n, target, anchor, resolved))
				}
			}
		}
	}
	if len(broken) > 0 {
		t.Errorf("%d broken links:\n%s", len(broken), strings.Join(broken, "\n"))
	}
}

var (
	makeCall   = regexp.MustCompile(`(?:^|[\s;&|(])make((?:[ \t]+[^\s#;&|)]+)+)`)
	makeTarget = regexp.MustCompile(`^[a-z][a-z0-9_.-]*$`)
	makeRule   = regexp.MustCompile(`^([A-Za-z0-9_.-]+(?:[ \t]+[A-Za-z0-9_.-]+)*)[ \t]*:([^=]|$)`)
	makePhony  = regexp.MustCompile(`^\.PHONY[ \t]*:(.*)$`)
)

// makeTargets reads the targets of the Makefile: the names of its rules and
// those it declares .PHONY.
func makeTargets(t *testing.T) map[string]bool {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	targets := map[string]bool{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		text := s.Text()
		if m := makePhony.FindStringSubmatch(text); m != nil {
			for _, name := range strings.Fields(m[1]) {
				targets[name] = true
			}
			continue
		}
		if m := makeRule.FindStringSubmatch(text); m != nil {
			for _, name := range strings.Fields(m[1]) {
				targets[name] = true
			}
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return targets
}

// TestMakeTargets checks that every `make TARGET` in the docs' code names a
// target of the Makefile.
func TestMakeTargets(t *testing.T) {
	targets := makeTargets(t)
	if !targets["test"] {
		t.Fatalf("read no target test from the Makefile: %v", targets)
	}
	var missing []string
	for _, p := range markdownFiles(t) {
		for _, l := range readDoc(t, p).code {
			for _, m := range makeCall.FindAllStringSubmatch(l.text, -1) {
				for _, word := range strings.Fields(m[1]) {
					if strings.HasPrefix(word, "-") || strings.Contains(word, "=") {
						continue // a flag or a variable
					}
					if !makeTarget.MatchString(word) {
						break // the end of the command
					}
					if !targets[word] {
						missing = append(missing, fmt.Sprintf("%s:%d: make %s: no such target in the Makefile", p, l.n, word))
					}
				}
			}
		}
	}
	if len(missing) > 0 {
		t.Errorf("%d make targets the Makefile lacks:\n%s", len(missing), strings.Join(missing, "\n"))
	}
}

// cli is the evalmeter binary, built once from the tree.
type cli struct {
	bin      string
	commands map[string]bool // "submit", "clients grant", ...
	mu       sync.Mutex
	flags    map[string]map[string]bool // command → flags defined ("-url")
}

var (
	helpCommand = regexp.MustCompile(`^\s+evalmeter ([a-z][a-z0-9-]*)(?: ([a-z][a-z0-9-]*))?`)
	helpFlag    = regexp.MustCompile(`^\s+(-[A-Za-z0-9][A-Za-z0-9_.-]*)`)
)

func buildCLI(t *testing.T) *cli {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(t.TempDir(), "evalmeter")
	build := exec.Command(goTool, "build", "-o", bin, "./cmd/evalmeter")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/evalmeter: %v\n%s", err, out)
	}
	c := &cli{bin: bin, commands: map[string]bool{}, flags: map[string]map[string]bool{}}
	out, err := exec.Command(bin, "-h").CombinedOutput()
	if err != nil {
		t.Fatalf("evalmeter -h: %v\n%s", err, out)
	}
	for _, text := range strings.Split(string(out), "\n") {
		m := helpCommand.FindStringSubmatch(text)
		if m == nil {
			continue
		}
		c.commands[m[1]] = true
		if m[2] != "" && m[1] == "clients" {
			c.commands[m[1]+" "+m[2]] = true
		}
	}
	if !c.commands["submit"] || !c.commands["clients grant"] {
		t.Fatalf("evalmeter -h names no submit or clients grant:\n%s", out)
	}
	return c
}

// flagsOf returns the flags that evalmeter COMMAND -h lists.
func (c *cli) flagsOf(t *testing.T, command string) map[string]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f, ok := c.flags[command]; ok {
		return f
	}
	out, _ := exec.Command(c.bin, append(strings.Fields(command), "-h")...).CombinedOutput()
	f := map[string]bool{}
	for _, text := range strings.Split(string(out), "\n") {
		if m := helpFlag.FindStringSubmatch(text); m != nil {
			f[m[1]] = true
		}
	}
	c.flags[command] = f
	return f
}

var (
	// evalmeterCall is `evalmeter WORD`: the binary's name as a word of its
	// own (also bin/evalmeter), then a word. At the start of a command
	// (start, or after a pipe, ;, && or $( ), WORD must be a command.
	evalmeterCall = regexp.MustCompile(`(^|[\s/(|;&$])evalmeter[ \t]+([a-z][a-z0-9-]*)(?:[ \t]+([a-z][a-z0-9-]*))?([ \t]|$)`)
	commandStart  = regexp.MustCompile(`(?:^|[|;&(]|\$\()[ \t]*(?:\$[ \t]+)?(?:[A-Za-z_][A-Za-z0-9_]*=[^\s]*[ \t]+)*(?:\./|bin/)?$`)
	longFlag      = regexp.MustCompile(`(?:^|[\s\[(])--([A-Za-z0-9][A-Za-z0-9-]*)`)
)

// TestCLIFlags checks that every `evalmeter COMMAND ... --flag` in the docs'
// code names a command of the binary and a flag that the command's -h lists.
func TestCLIFlags(t *testing.T) {
	c := buildCLI(t)
	var missing []string
	checked := 0
	for _, p := range markdownFiles(t) {
		for _, l := range readDoc(t, p).code {
			text := l.text
			calls := evalmeterCall.FindAllStringSubmatchIndex(text, -1)
			for i, m := range calls {
				word := text[m[4]:m[5]]
				command, argStart := word, m[5]
				if m[6] >= 0 && c.commands[word+" "+text[m[6]:m[7]]] {
					command, argStart = word+" "+text[m[6]:m[7]], m[7]
				}
				if !c.commands[command] {
					// kubectl -n evalmeter logs, helm install evalmeter ...:
					// a command only where a command starts.
					if commandStart.MatchString(text[:m[3]]) {
						missing = append(missing, fmt.Sprintf("%s:%d: evalmeter %s: no such command (evalmeter -h)", p, l.n, word))
					}
					continue
				}
				// The command's arguments: up to the next call, a pipe, a
				// list operator or a comment.
				end := len(text)
				if i+1 < len(calls) {
					end = calls[i+1][0]
				}
				args := text[argStart:end]
				if j := strings.IndexAny(args, "|;#"); j >= 0 {
					args = args[:j]
				}
				if j := strings.Index(args, "&&"); j >= 0 {
					args = args[:j]
				}
				defined := c.flagsOf(t, command)
				for _, f := range longFlag.FindAllStringSubmatch(args, -1) {
					checked++
					if !defined["-"+f[1]] {
						missing = append(missing, fmt.Sprintf("%s:%d: evalmeter %s --%s: no such flag (evalmeter %s -h)", p, l.n, command, f[1], command))
					}
				}
			}
		}
	}
	t.Logf("checked %d flags", checked)
	if len(missing) > 0 {
		sort.Strings(missing)
		t.Errorf("%d evalmeter commands or flags the binary lacks:\n%s", len(missing), strings.Join(missing, "\n"))
	}
}

var designRef = regexp.MustCompile(`docs/design\.md#([a-z0-9-]+)`)

// TestCodeReferences: every reference to a section of docs/design.md in the code, its
// tests and its migrations is a heading of the design document.
func TestCodeReferences(t *testing.T) {
	heads := map[string]bool{}
	for _, h := range readDoc(t, "docs/design.md").heads {
		heads[h] = true
	}
	refs := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "bin" || d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if ext := filepath.Ext(path); d.IsDir() || ext != ".go" && ext != ".sql" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, text := range strings.Split(string(b), "\n") {
			for _, m := range designRef.FindAllStringSubmatch(text, -1) {
				refs++
				if !heads[m[1]] {
					rel, _ := filepath.Rel(root, path)
					t.Errorf("%s:%d: docs/design.md#%s is not a heading of docs/design.md", rel, i+1, m[1])
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if refs == 0 {
		t.Error("no docs/design.md# reference found in the code: is root the repository?")
	}
}
