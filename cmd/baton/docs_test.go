package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
)

// docLine is one baton command line of the docs: in a code block (a line
// starting with "baton ", after an optional "$ " or a crontab's five
// schedule fields) or in inline code starting with "baton ".
type docLine struct {
	file   string
	line   int
	text   string
	inline bool
}

func (d docLine) String() string { return fmt.Sprintf("%s:%d: %s", d.file, d.line, d.text) }

// docFiles are the files whose command lines must run as written.
func docFiles(t *testing.T) []string {
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil || len(docs) == 0 {
		t.Fatalf("no docs: %v", err)
	}
	return append([]string{"../../README.md"}, docs...)
}

var (
	inlineCommand = regexp.MustCompile("`(baton [^`]*)`")
	cronPrefix    = regexp.MustCompile(`^(\S+\s+){5}baton `)
)

// docCommandLines extracts every baton command line of the files.
func docCommandLines(t *testing.T, files []string) []docLine {
	var out []docLine
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(f, "../../")
		block := false
		sc := bufio.NewScanner(strings.NewReader(string(data)))
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				block = !block
				continue
			}
			if block {
				l := strings.TrimPrefix(strings.TrimSpace(line), "$ ")
				if m := cronPrefix.FindString(l); m != "" {
					l = l[len(m)-len("baton "):]
				}
				if strings.HasPrefix(l, "baton ") {
					out = append(out, docLine{name, n, l, false})
				}
				continue
			}
			for _, m := range inlineCommand.FindAllStringSubmatch(line, -1) {
				out = append(out, docLine{name, n, m[1], true})
			}
		}
	}
	return out
}

// docSkips are the command lines of the docs that are not command lines a
// user types as they are, each with why.
var docSkips = map[string]string{
	"baton lock KEY":                "names the lock a bare KEY takes; the README's crontab line runs baton lock in full",
	"baton pause --note":            "names a flag of pause; the pause lines run it",
	"baton resume --skip":           "names a flag of resume; the resume lines run it",
	"baton resume --catch-up":       "names a flag of resume; the resume lines run it",
	"baton lock --fresh-deployment": "names a flag of lock",
}

// docSynopsis is a usage synopsis: optional parts in brackets.
var docSynopsis = regexp.MustCompile(`\[-`)

// docPlaceholders are the words the docs write for what the reader fills
// in, and what the test fills in.
func docPlaceholders(from, to string) map[string]string {
	return map[string]string{
		"JOB": "nightly", "JOB...": "nightly", "FILE": "baton.yaml", "KEY": "nightly-report",
		"T": from, "T1": from, "T2": to, "N": "5", "TEXT": "vendor fix", "NAME": "alice",
		// a host and a program a test cannot have
		"/usr/local/bin/report": "true",
	}
}

// docConfig is the job list of the docs' examples.
const docConfig = `redis:
  url: %s
jobs:
  - name: report
    schedule: "*/5 * * * *"
    concurrency: allow
    starting_deadline: 24h
    exec: {command: ["true"]}
  - name: nightly
    schedule: "0 2 * * *"
    concurrency: allow
    starting_deadline: 24h
    exec: {command: ["true"]}
  - name: extract
    schedule: "0 * * * *"
    exec: {command: ["true"]}
  - name: load
    after: [extract]
    exec: {command: ["true"]}
`

// Every baton command line of README.md and docs/*.md runs as written
// against a real Redis and a job list with the jobs they name, from a
// directory holding baton.yaml (the default config file) and, for baton
// dev, config.example.yaml: it exits 0 (run, scheduler, worker and dev once
// their replicas started and a SIGTERM stopped them). A bare "baton CMD" in
// the prose names a command: "baton help CMD" must know it. Placeholders
// (JOB, FILE, T1...) are filled in, the files they read (tenant-42.yaml)
// are written as the docs show them, hosts and programs the test cannot have
// are replaced, and a backfill's dates become a window of the same shape
// within what the new Redis's history can tell; a line that is not a
// command line (a synopsis, a flag named in prose) is in docSkips with why.
func TestEveryDocumentedCommandRuns(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	url := redisURL(srv)
	dir := t.TempDir()
	if err := writeFile(filepath.Join(dir, "baton.yaml"), fmt.Sprintf(docConfig, url)); err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile("../../config.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := writeFile(filepath.Join(dir, "config.example.yaml"), string(example)); err != nil {
		t.Fatal(err)
	}
	// the files the docs' command lines read, as the docs show them
	for _, name := range []string{"tenant-42.yaml", "business.yaml", "holidays-de.txt"} {
		if err := writeFile(filepath.Join(dir, name), docFileBlock(t, name)); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{"BATON_REDIS_URL=" + url, "BATON_LOG_FORMAT=json"}
	// the Redis is brand new: mark it once, as a first deployment does
	// (baton.yaml's masters under its namespace, baton lock's prefix too)
	if code, errs := runDoc(t, dir, env, "init"); code != 0 {
		t.Fatalf("marking the new Redis: exit %d\n%s", code, errs)
	}
	hour := time.Now().UTC().Truncate(time.Hour)
	from, to := hour.Add(-7*time.Hour), hour.Add(-time.Hour)
	fill := docPlaceholders(from.Format(time.RFC3339), to.Format(time.RFC3339))
	fill["URL"] = url

	lines := docCommandLines(t, docFiles(t))
	if len(lines) < 30 {
		t.Fatalf("found only %d command lines in the docs", len(lines))
	}
	ran := 0
	for _, d := range lines {
		if why, ok := docSkips[d.text]; ok {
			t.Logf("skipped %s (%s)", d, why)
			continue
		}
		if docSynopsis.MatchString(d.text) {
			t.Logf("skipped %s (a synopsis)", d)
			continue
		}
		words, err := shellWords(d.text)
		if err != nil {
			t.Errorf("%s: %v", d, err)
			continue
		}
		args := words[1:]
		if d.inline && (len(args) == 1 || len(args) == 2 && (args[0] == "schedules" || args[0] == "calendars")) {
			args = append([]string{"help"}, args...) // names the command
		}
		for i, a := range args {
			if v, ok := fill[a]; ok {
				args[i] = v
			}
			if strings.HasPrefix(a, "redis://") {
				args[i] = url
			}
		}
		if args[0] == "backfill" {
			for i := 1; i < len(args); i++ {
				switch args[i-1] {
				case "--from":
					args[i] = from.Format(time.RFC3339)
				case "--to":
					args[i] = to.Format(time.RFC3339)
				}
			}
		}
		var code int
		var stderr string
		switch args[0] {
		case "run", "scheduler", "worker", "dev":
			code, stderr = runUntilStarted(t, dir, env, args...)
		case "init":
			// marked above: a second baton init refuses by design, naming the master
			code, stderr = runDoc(t, dir, env, args...)
			if code == 1 && strings.Contains(stderr, "carries a marker") {
				code = 0
			}
		default:
			code, stderr = runDoc(t, dir, env, args...)
		}
		if code != 0 {
			t.Errorf("%s\n  ran baton %q: exit %d\n%s", d, args, code, stderr)
		}
		ran++
		t.Logf("ran %s: baton %q", d, args)
	}
	t.Logf("%d of %d command lines ran", ran, len(lines))
}

// docFileBlock is the file name as the docs show it: the code block whose
// first line is "# name".
func docFileBlock(t *testing.T, name string) string {
	t.Helper()
	for _, f := range docFiles(t) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		_, rest, ok := strings.Cut(string(data), "```yaml\n# "+name+"\n")
		if !ok {
			if _, rest, ok = strings.Cut(string(data), "```text\n# "+name+"\n"); !ok {
				continue
			}
		}
		block, _, ok := strings.Cut(rest, "```")
		if !ok {
			t.Fatalf("%s: the block of %s does not end", f, name)
		}
		return block
	}
	t.Fatalf("no doc shows %s", name)
	return ""
}

// runDoc runs the binary in dir and returns its exit status and stderr.
func runDoc(t *testing.T, dir string, env []string, args ...string) (int, string) {
	t.Helper()
	p := startIn(t, dir, env, args...)
	return p.wait(t, time.Minute), p.stderr.String()
}

// runUntilStarted runs a command that runs until stopped: once every
// replica it runs has started, it sends SIGTERM and returns the exit status.
func runUntilStarted(t *testing.T, dir string, env []string, args ...string) (int, string) {
	t.Helper()
	p := startIn(t, dir, env, args...)
	replicas := 1
	if args[0] == "dev" {
		replicas = 3
	}
	poll.Require(t, time.Minute, "baton "+args[0]+" to start its replicas", func() bool {
		select {
		case <-p.done:
			return true
		default:
		}
		return strings.Count(p.stderr.String(), "replica started") >= replicas
	})
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	return p.wait(t, time.Minute), p.stderr.String()
}

// startIn starts the binary (baton dev: the one built with the dev tag) in
// dir, with env added to a BATON_-free environment.
func startIn(t *testing.T, dir string, env []string, args ...string) *proc {
	t.Helper()
	bin := batonBin
	if args[0] == "dev" {
		bin = devBin
	}
	p := &proc{done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "BATON_") && !strings.HasPrefix(kv, "REDISCLI_AUTH=") {
			p.cmd.Env = append(p.cmd.Env, kv)
		}
	}
	p.cmd.Env = append(p.cmd.Env, env...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	p.cmd.WaitDelay = 5 * time.Second
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = p.cmd.Wait()
		p.code = p.cmd.ProcessState.ExitCode()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// shellWords splits a command line as sh does for the lines of the docs:
// words separated by blanks, '...' and "..." quoting, and a # comment.
func shellWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '#' && !inWord:
			return words, nil
		case c == '\'' || c == '"':
			end := strings.IndexByte(s[i+1:], c)
			if end < 0 {
				return nil, fmt.Errorf("unterminated %c", c)
			}
			cur.WriteString(s[i+1 : i+1+end])
			i += end + 1
			inWord = true
		case c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			inWord = true
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// The extractor finds the command lines of code blocks (also after "$ " and
// a crontab's schedule) and of inline code, and splits them as sh does.
func TestDocCommandLinesExtraction(t *testing.T) {
	t.Parallel()
	md := filepath.Join(t.TempDir(), "x.md")
	if err := writeFile(md, "Run `baton status --json` or `make`.\n```sh\n$ baton pause report --note \"vendor fix\"  # why\n*/5 * * * * baton lock k -- sh -c 'a # b'\nbatonx\n```\nnot baton here\n"); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range docCommandLines(t, []string{md}) {
		words, err := shellWords(d.text)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%d %v %q", d.line, d.inline, words))
	}
	want := []string{
		`1 true ["baton" "status" "--json"]`,
		`3 false ["baton" "pause" "report" "--note" "vendor fix"]`,
		`4 false ["baton" "lock" "k" "--" "sh" "-c" "a # b"]`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
