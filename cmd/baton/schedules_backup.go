package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/config"
)

// "baton schedules export" and "import": a backup of the runtime schedules
// as JSON Lines, one schedule a line, and its way back.

const schedulesExportHelp = `usage: baton schedules export [--config FILE] [--prefix P] -o FILE

Writes every runtime schedule (or those whose id starts with P) to FILE
as JSON Lines, one schedule a line: {"id", "definition", "created",
"updated", "version"}, in id order, a page of 1,000 at a time. The
definitions are as put, their http header values included: FILE is
created with mode 0600, and "-o -" writes to standard output only when
it is not a terminal. "baton schedules import" puts them back.

Exit status: 0 written; 1 Redis unreachable, FILE not written, or
schedules that cannot be read left out (each named; FILE.partial holds
the others, and FILE is left as it was); 2 usage error.

flags:
`

const schedulesImportHelp = `usage: baton schedules import [--config FILE] [--force] -f FILE

Puts every schedule of FILE (JSON Lines, as "baton schedules export"
writes them; "-" reads stdin) back under its id, signed with this
config's keys. Every line is checked first, as a put checks it, and no
id may be on two lines (each problem is printed with its line, and
nothing is put while one is wrong); then they are put one by one, with progress every 10,000. A
schedule no live replica can run is put too with --force (as
"schedules put --force"), else it is reported and the others are put.
Running it again puts the same definitions again.

Exit status: 0 all put; 1 Redis unreachable, or some not put (each
named); 2 usage error or a line that is not a valid schedule.

flags:
`

// exportLine is one schedule of an export.
type exportLine struct {
	ID         string          `json:"id"`
	Definition json.RawMessage `json:"definition"`
	Created    time.Time       `json:"created"`
	Updated    time.Time       `json:"updated"`
	Version    int64           `json:"version"`
}

type exportOpts struct {
	path, prefix, out string
}

func defineExport(fs *flagSet) *exportOpts {
	o := &exportOpts{}
	fs.configFlag(&o.path)
	fs.StringVar(&o.prefix, "prefix", "", "only the ids that start with `P` (report/)")
	fs.StringVarP(&o.out, "output", "o", "", "write to `FILE` (- : standard output, not a terminal)")
	return o
}

func runExport(fs *flagSet, o *exportOpts, args []string, stdout, stderr io.Writer) int {
	name := fs.name
	switch {
	case len(args) > 0:
		return usageExit(name, usagef("unexpected argument %q (the file is -o FILE)", args[0]), stderr)
	case o.out == "":
		return usageExit(name, usagef("name where to write: -o FILE (or -o - for a pipe)"), stderr)
	case o.out == "-" && isTerminal(stdout):
		return usageExit(name, usagef("the export holds the definitions' http header values: write it to a file (-o FILE) or a pipe, not a terminal"), stderr)
	}
	c, code := openCluster(fs, o.path, name, stderr)
	if c == nil {
		return code
	}
	defer c.Close()
	w := stdout
	var f *os.File
	if o.out != "-" {
		var err error
		// written beside and renamed: a failed export leaves no half file
		f, err = os.CreateTemp(filepath.Dir(o.out), ".baton-export-*")
		if err != nil {
			printf(stderr, "baton %s: %v\n", name, err)
			return 1
		}
		defer os.Remove(f.Name())
		defer f.Close()
		w = f
	}
	bw := bufio.NewWriter(w)
	n, left, after := 0, 0, ""
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		page, err := c.ListSchedules(ctx, baton.ScheduleQuery{Prefix: o.prefix, After: after, Limit: 1000})
		cancel()
		if code, failed := scheduleFailed(name, c, err, stderr); failed {
			return code
		}
		for _, s := range page.Schedules {
			if s.Definition == nil {
				printf(stderr, "baton %s: %s left out: %s\n", name, s.ID, s.Error)
				left++
				continue
			}
			b, _ := json.Marshal(exportLine{ID: s.ID, Definition: s.Definition, Created: s.Created, Updated: s.Updated, Version: s.Version})
			bw.Write(append(b, '\n'))
			n++
		}
		if n > 0 && n%10000 < len(page.Schedules) {
			printf(stderr, "baton %s: %d exported\n", name, n)
		}
		if after = page.Next; after == "" {
			break
		}
	}
	if err := bw.Flush(); err != nil {
		printf(stderr, "baton %s: %v\n", name, err)
		return 1
	}
	if f != nil {
		if err := f.Chmod(0o600); err != nil {
			printf(stderr, "baton %s: %v\n", name, err)
			return 1
		}
		if err := f.Close(); err != nil {
			printf(stderr, "baton %s: %v\n", name, err)
			return 1
		}
		// an export that left schedules out does not replace a file that
		// may be an earlier whole one: it goes beside it
		target := o.out
		if left > 0 {
			target += ".partial"
		}
		if err := os.Rename(f.Name(), target); err != nil {
			printf(stderr, "baton %s: %v\n", name, err)
			return 1
		}
		if left > 0 {
			printf(stderr, "baton %s: %d runtime schedules exported to %s, %d left out (see above): the export is not whole, and %s is left as it was\n", name, n, target, left, o.out)
			return 1
		}
	}
	if left > 0 {
		printf(stderr, "baton %s: %d runtime schedules exported, %d left out (see above): the export is not whole\n", name, n, left)
		return 1
	}
	printf(stderr, "baton %s: %d runtime schedules exported\n", name, n)
	return 0
}

type importOpts struct {
	path, file string
	force      bool
}

func defineImport(fs *flagSet) *importOpts {
	o := &importOpts{}
	fs.configFlag(&o.path)
	fs.StringVarP(&o.file, "file", "f", "", "read the export from `FILE` (- : stdin)")
	fs.BoolVar(&o.force, "force", false, "put the schedules no live replica can run yet too")
	return o
}

func runImport(fs *flagSet, o *importOpts, args []string, stdout, stderr io.Writer) int {
	name := fs.name
	switch {
	case len(args) > 0:
		return usageExit(name, usagef("unexpected argument %q (the file is -f FILE)", args[0]), stderr)
	case o.file == "":
		return usageExit(name, usagef("name the export to read: -f FILE (- : stdin)"), stderr)
	}
	var in io.Reader = stdin
	source := "<stdin>"
	if o.file != "-" {
		f, err := os.Open(o.file)
		if err != nil {
			return usageExit(name, usagef("reading the export: %v", err), stderr)
		}
		defer f.Close()
		in, source = f, o.file
	}
	cfg, err := loadConfigFile(fs, o.path)
	if err != nil {
		return usageExit(name, err, stderr)
	}
	// every line is checked before anything is put
	var lines []exportLine
	bad := 0
	lineOf := map[string]int{} // id -> the line that holds it
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for no := 1; sc.Scan(); no++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		var l exportLine
		if err := json.Unmarshal([]byte(text), &l); err != nil || l.ID == "" || len(l.Definition) == 0 {
			why := "want a JSON object with \"id\" and \"definition\""
			if err != nil {
				why = err.Error()
			}
			printf(stderr, "%s:%d: %s\n", source, no, why)
			bad++
			continue
		}
		if first, dup := lineOf[l.ID]; dup {
			printf(stderr, "%s:%d: %s: also on line %d (an export holds each id once)\n", source, no, l.ID, first)
			bad++
			continue
		}
		lineOf[l.ID] = no
		if _, err := config.DecodeSchedule(cfg, l.ID, l.Definition, time.Time{}); err != nil {
			printf(stderr, "%s:%d: %s: %s\n", source, no, l.ID, cfg.MaskSecrets(err.Error()))
			bad++
			continue
		}
		lines = append(lines, l)
	}
	if err := sc.Err(); err != nil {
		return usageExit(name, usagef("reading %s: %v", source, err), stderr)
	}
	if bad > 0 {
		printf(stderr, "baton %s: %d line(s) of %s are not valid schedules: nothing was put\n", name, bad, source)
		return exitUsage
	}
	c, err := baton.NewCluster(cfg)
	if err != nil {
		return usageExit(name, err, stderr)
	}
	defer c.Close()
	var opts []baton.PutOption
	if o.force {
		opts = append(opts, baton.AheadOfDeploy())
	}
	put, failed := 0, 0
	for i, l := range lines {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := c.PutScheduleDocument(ctx, l.ID, l.Definition, opts...)
		cancel()
		if err != nil {
			printf(stderr, "baton %s: %s not put: %v\n", name, l.ID, errors.New(cfg.MaskSecrets(err.Error())))
			failed++
		} else {
			put++
		}
		if (i+1)%10000 == 0 {
			printf(stderr, "baton %s: %d of %d done\n", name, i+1, len(lines))
		}
	}
	printf(stdout, "%d runtime schedules put from %s", put, source)
	if failed > 0 {
		printf(stdout, ", %d not put (above)\n", failed)
		return 1
	}
	fmt.Fprintln(stdout)
	return 0
}
