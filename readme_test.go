package baton_test

// Tests that keep the README and docs/ true: links resolve, the two commands
// the README gives exist, the README stays short, its Layout names every
// package, the tests its guarantee table names exist, and its Go program
// builds. None of them needs Redis.

import (
	"bufio"
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/batonhq/baton/config"
)

// readmeMaxLines is how long the README may grow: what a newcomer reads in
// five minutes, upgrade rules and license included. Depth goes to docs/.
const readmeMaxLines = 260

// docFiles returns README.md and every docs/*.md.
func docFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md"}
	more, err := filepath.Glob(filepath.Join("docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(more) == 0 {
		t.Fatal("docs/ has no .md pages")
	}
	return append(files, more...)
}

func readDoc(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var (
	mdLink     = regexp.MustCompile(`!?\[([^\]]*)\]\(([^)\s]+)\)`)
	codeSpan   = regexp.MustCompile("`[^`]*`")
	urlScheme  = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
	fenceStart = "```"
)

// proseLines returns the lines of a markdown file outside fenced code blocks,
// with their 1-based line numbers.
func proseLines(text string) (lines []string, numbers []int) {
	inFence := false
	for i, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), fenceStart) {
			inFence = !inFence
			continue
		}
		if !inFence {
			lines = append(lines, line)
			numbers = append(numbers, i+1)
		}
	}
	return lines, numbers
}

type docLink struct {
	line   int
	target string
}

// links returns the link targets of a markdown file, outside code blocks and
// code spans.
func links(text string) []docLink {
	var out []docLink
	lines, numbers := proseLines(text)
	for i, line := range lines {
		// A code span's text is not a link, but a link's text may be a code
		// span: blank spans only where they are not inside [...].
		stripped := codeSpan.ReplaceAllStringFunc(line, func(s string) string {
			return strings.Repeat("x", len(s))
		})
		for _, m := range mdLink.FindAllStringSubmatchIndex(stripped, -1) {
			out = append(out, docLink{line: numbers[i], target: line[m[4]:m[5]]})
		}
	}
	return out
}

// headingSlugs returns the anchors GitHub gives the headings of a markdown
// file: lower case, punctuation dropped, spaces to hyphens, repeats numbered.
func headingSlugs(text string) map[string]bool {
	slugs := map[string]bool{}
	seen := map[string]int{}
	lines, _ := proseLines(text)
	for _, line := range lines {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.TrimLeft(line, "#")
		if h == "" || h[0] != ' ' {
			continue
		}
		s := githubSlug(h)
		if n := seen[s]; n > 0 {
			slugs[s+"-"+strconv.Itoa(n)] = true
		} else {
			slugs[s] = true
		}
		seen[s]++
	}
	return slugs
}

func githubSlug(heading string) string {
	heading = mdLink.ReplaceAllString(heading, "$1") // a link's text stays, its target goes
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestDocsLinksResolve(t *testing.T) {
	t.Parallel()
	if got := githubSlug("`baton lock`: a distributed flock(1)"); got != "baton-lock-a-distributed-flock1" {
		t.Fatalf("slug rule: got %q", got)
	}
	slugsOf := map[string]map[string]bool{}
	slugs := func(path string) map[string]bool {
		if s, ok := slugsOf[path]; ok {
			return s
		}
		s := headingSlugs(readDoc(t, path))
		slugsOf[path] = s
		return s
	}
	checked := 0
	for _, file := range docFiles(t) {
		for _, l := range links(readDoc(t, file)) {
			if urlScheme.MatchString(l.target) {
				continue // http(s), mailto: not checked here
			}
			checked++
			path, anchor, _ := strings.Cut(l.target, "#")
			target := file
			if path != "" {
				target = filepath.Join(filepath.Dir(file), filepath.FromSlash(path))
				if _, err := os.Stat(target); err != nil {
					t.Errorf("%s:%d: link %q: %v", file, l.line, l.target, err)
					continue
				}
			}
			if anchor == "" {
				continue
			}
			if !strings.HasSuffix(target, ".md") {
				t.Errorf("%s:%d: link %q: an anchor into a file that is not markdown", file, l.line, l.target)
				continue
			}
			if !slugs(target)[anchor] {
				t.Errorf("%s:%d: link %q: %s has no heading with anchor #%s", file, l.line, l.target, target, anchor)
			}
		}
	}
	if checked == 0 {
		t.Fatal("found no relative links at all: the link parser is broken")
	}
}

// Every page under docs/ can be reached from the README by following links.
func TestDocsReachableFromReadme(t *testing.T) {
	t.Parallel()
	reached := map[string]bool{"README.md": true}
	queue := []string{"README.md"}
	for len(queue) > 0 {
		file := queue[0]
		queue = queue[1:]
		for _, l := range links(readDoc(t, file)) {
			if urlScheme.MatchString(l.target) {
				continue
			}
			path, _, _ := strings.Cut(l.target, "#")
			if path == "" || !strings.HasSuffix(path, ".md") {
				continue
			}
			target := filepath.Clean(filepath.Join(filepath.Dir(file), filepath.FromSlash(path)))
			if _, err := os.Stat(target); err != nil || reached[target] {
				continue
			}
			reached[target] = true
			queue = append(queue, target)
		}
	}
	for _, file := range docFiles(t) {
		if !reached[filepath.Clean(file)] {
			t.Errorf("%s is not reachable from README.md by links", file)
		}
	}
}

// The README's two commands exist and are what CI runs.
func TestReadmeCommandsExist(t *testing.T) {
	t.Parallel()
	readme := readDoc(t, "README.md")
	for _, cmd := range []string{"make dev", "make test", "go run -tags dev,nootlp -gcflags='all=-N -l' ./cmd/baton dev"} {
		if !strings.Contains(readme, cmd) {
			t.Errorf("README.md does not name %q", cmd)
		}
	}

	targets := makeTargets(t, readDoc(t, "Makefile"))
	for _, name := range []string{"test", "dev"} {
		if _, ok := targets[name]; !ok {
			t.Errorf("Makefile has no %q target", name)
		}
	}
	if recipe := targets["dev"]; !strings.Contains(recipe, "run -tags dev,nootlp -gcflags='$(DEVGCFLAGS)' ./cmd/baton dev") {
		t.Errorf("Makefile's dev target is not `go run -tags dev,nootlp -gcflags='$(DEVGCFLAGS)' ./cmd/baton dev`:\n%s", recipe)
	}
	if !strings.Contains(readDoc(t, "Makefile"), "DEVGCFLAGS ?= all=-N -l") {
		t.Errorf("Makefile's DEVGCFLAGS is not what the README's make dev line says (all=-N -l)")
	}

	ci := readDoc(t, filepath.Join(".ci", "run"))
	runsMakeTest := false
	for _, line := range strings.Split(ci, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "#") {
			continue
		}
		if f := strings.Fields(line); len(f) >= 2 && f[len(f)-2] == "make" && f[len(f)-1] == "test" {
			runsMakeTest = true
		}
	}
	if !runsMakeTest {
		t.Errorf(".ci/run does not run `make test`:\n%s", ci)
	}
}

// makeTargets returns each rule of a Makefile with its recipe lines.
func makeTargets(t *testing.T, text string) map[string]string {
	t.Helper()
	targets := map[string]string{}
	current := ""
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "\t") {
			if current != "" {
				targets[current] += line + "\n"
			}
			continue
		}
		current = ""
		if strings.HasPrefix(line, "#") || strings.HasPrefix(line, ".") {
			continue
		}
		head, _, ok := strings.Cut(line, ":")
		if !ok || strings.ContainsAny(head, "=$ \t") || strings.HasPrefix(line[len(head):], ":=") {
			continue
		}
		current = head
		targets[current] += ""
	}
	return targets
}

func TestReadmeIsShort(t *testing.T) {
	t.Parallel()
	readme := readDoc(t, "README.md")
	if n := strings.Count(strings.TrimRight(readme, "\n"), "\n") + 1; n >= readmeMaxLines {
		t.Errorf("README.md has %d lines, want under %d: move depth to docs/", n, readmeMaxLines)
	}
}

// readmeLayout returns the first code block after the README's "## Layout".
func readmeLayout(t *testing.T) []string {
	t.Helper()
	readme := readDoc(t, "README.md")
	_, after, ok := strings.Cut(readme, "\n## Layout\n")
	if !ok {
		t.Fatal("README.md has no \"## Layout\" section")
	}
	_, block, ok := strings.Cut(after, fenceStart+"\n")
	if !ok {
		t.Fatal("README.md's Layout has no code block")
	}
	block, _, ok = strings.Cut(block, "\n"+fenceStart)
	if !ok {
		t.Fatal("README.md's Layout code block is not closed")
	}
	return strings.Split(block, "\n")
}

// The Layout names every Go package directory of the module, and everything
// it names exists.
func TestReadmeLayoutNamesEveryPackage(t *testing.T) {
	t.Parallel()
	var named []string // the entries: "cmd/baton/", "baton.go", ...
	for _, line := range readmeLayout(t) {
		if line == "" || line[0] == ' ' {
			continue // a continuation line
		}
		entry := strings.Fields(line)[0]
		if strings.HasSuffix(entry, ",") { // "baton.go, http.go  ..."
			for _, f := range strings.Fields(line) {
				named = append(named, strings.TrimSuffix(f, ","))
				if !strings.HasSuffix(f, ",") {
					break
				}
			}
			continue
		}
		named = append(named, entry)
	}
	isNamed := map[string]bool{}
	for _, n := range named {
		isNamed[n] = true
		if _, err := os.Stat(filepath.FromSlash(strings.TrimSuffix(n, "/"))); err != nil {
			t.Errorf("README.md's Layout names %s, which does not exist", n)
		}
	}

	var dirs []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != "." && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata") {
				return filepath.SkipDir
			}
			if path != "." {
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					// Another module (bench/): named as a whole, its insides are its own.
					dirs = append(dirs, filepath.ToSlash(path))
					return filepath.SkipDir
				}
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") {
			dir := filepath.ToSlash(filepath.Dir(path))
			if len(dirs) == 0 || dirs[len(dirs)-1] != dir {
				dirs = append(dirs, dir)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range dirs {
		if dir == "." {
			if !isNamed["baton.go"] {
				t.Errorf("README.md's Layout does not name the root package (baton.go)")
			}
			continue
		}
		if !isNamed[dir+"/"] {
			t.Errorf("README.md's Layout does not name the package directory %s/", dir)
		}
	}
	if len(dirs) < 5 {
		t.Fatalf("found only %d package directories: the walk is broken", len(dirs))
	}
}

// testName is a test function's name in a markdown code span; a trailing *
// makes it a prefix.
var testName = regexp.MustCompile("`((?:Test|Fuzz|Benchmark|Example)[A-Za-z0-9_]*\\*?)`")

// testFuncs returns the name of every test, fuzz, benchmark and example
// function in the repository's *_test.go files.
func testFuncs(t *testing.T) map[string]bool {
	t.Helper()
	decl := regexp.MustCompile(`(?m)^func ((?:Test|Fuzz|Benchmark|Example)[A-Za-z0-9_]*)\(`)
	names := map[string]bool{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range decl.FindAllStringSubmatch(string(b), -1) {
			names[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(names) < 100 {
		t.Fatalf("found only %d test functions: the walk is broken", len(names))
	}
	return names
}

// Every test the README's guarantee table names (a row "| G1 | ..."; a name
// ending in * stands for every test it prefixes) exists in some *_test.go
// file: a renamed or deleted test fails here, not silently in the table.
func TestReadmeGuaranteesNameExistingTests(t *testing.T) {
	t.Parallel()
	readme := readDoc(t, "README.md")
	funcs := testFuncs(t)
	row := regexp.MustCompile(`^\| G[0-9]+ \|`)
	named := 0
	for i, line := range strings.Split(readme, "\n") {
		if !row.MatchString(line) {
			continue
		}
		for _, m := range testName.FindAllStringSubmatch(line, -1) {
			named++
			name, prefix := strings.CutSuffix(m[1], "*")
			found := funcs[name]
			for f := range funcs {
				if found || !prefix {
					break
				}
				found = strings.HasPrefix(f, name)
			}
			if !found {
				t.Errorf("README.md:%d: guarantee %s names %s, which no *_test.go file defines", i+1, strings.Fields(line)[1], m[1])
			}
		}
	}
	if named == 0 {
		t.Fatal("README.md's guarantee table names no tests: its rows (| G1 | ...) were not found")
	}
}

// The README's job list loads: it is a valid config, and its Go handler is
// the one the README's Go program registers.
func TestReadmeJobListLoads(t *testing.T) {
	readme := readDoc(t, "README.md")
	_, after, ok := strings.Cut(readme, "\n## A job list\n")
	if !ok {
		t.Fatal("README.md has no \"## A job list\" section")
	}
	_, src, ok := strings.Cut(after, fenceStart+"yaml\n")
	if !ok {
		t.Fatal("the job list section has no ```yaml block")
	}
	src, _, ok = strings.Cut(src, "\n"+fenceStart)
	if !ok {
		t.Fatal("the job list section's block is not closed")
	}
	t.Setenv("WARM_TOKEN", "a-token-from-the-environment")
	cfg, err := config.Load([]byte(src))
	if err != nil {
		t.Fatalf("README.md's job list does not load:\n%v", err)
	}
	if len(cfg.Jobs) == 0 {
		t.Fatal("README.md's job list has no jobs")
	}
	for _, j := range cfg.Jobs {
		if j.Handler != nil && !strings.Contains(readme, `reg.HandleFunc("`+j.Handler.Name+`"`) {
			t.Errorf("job %q names handler %q, which the README's Go program does not register", j.Name, j.Handler.Name)
		}
	}
}

// The README's Go program builds against the module as it is: it is compiled
// as a main package that exists only in a build overlay.
func TestReadmeGoProgramBuilds(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds a program: not in -short")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	readme := readDoc(t, "README.md")
	_, after, ok := strings.Cut(readme, "\n## Baton in a Go program\n")
	if !ok {
		t.Fatal("README.md has no \"## Baton in a Go program\" section")
	}
	_, src, ok := strings.Cut(after, fenceStart+"go\n")
	if !ok {
		t.Fatal("the Go program section has no ```go block")
	}
	src, _, ok = strings.Cut(src, "\n"+fenceStart)
	if !ok || !strings.HasPrefix(src, "package main\n") {
		t.Fatal("the Go program section's block is not a whole `package main` program")
	}

	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	file := filepath.Join(tmp, "main.go")
	if err := os.WriteFile(file, []byte(src+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	virtual := filepath.Join(root, "internal", "readmeprogram", "main.go") // not on disk
	overlay, _ := json.Marshal(map[string]any{"Replace": map[string]string{virtual: file}})
	overlayFile := filepath.Join(tmp, "overlay.json")
	if err := os.WriteFile(overlayFile, overlay, 0o600); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "build", "-overlay", overlayFile, "-o", os.DevNull, "./internal/readmeprogram")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("README.md's Go program does not build: %v\n%s", err, out)
	}
}

// The package's doc shows lines of ExampleNew, which compiles: each line
// of its code block (but "...") is in the example, so the doc cannot show
// a call that does not compile.
func TestPackageDocCodeIsTheExamples(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("baton.go")
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	doc, _, _ := strings.Cut(string(src), "\npackage baton")
	n := 0
	for line := range strings.Lines(doc) {
		code, ok := strings.CutPrefix(strings.TrimRight(line, "\n"), "//\t")
		if !ok || strings.TrimSpace(code) == "..." {
			continue
		}
		n++
		if !strings.Contains(string(example), strings.TrimSpace(code)) {
			t.Errorf("the package doc shows %q, which ExampleNew does not have", code)
		}
	}
	if n < 4 {
		t.Fatalf("found %d code lines in the package doc", n)
	}
}
