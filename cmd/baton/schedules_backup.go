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

Writes every runtime calendar ({"calendar", "definition", ...} lines,
first) and every runtime schedule (or those whose id starts with P) to
FILE as JSON Lines, one a line: {"id", "definition", "created",
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

Puts every calendar and schedule of FILE (JSON Lines, as "baton
schedules export" writes them; "-" reads stdin) back under its name or
id, signed with this config's keys: the calendars first, then each
schedule after the parents it runs after (after:). Every line is checked first, as a put checks it, and no
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
	ID         string          `json:"id,omitempty"`
	Calendar   string          `json:"calendar,omitempty"` // a runtime calendar's line (before the schedules)
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
	// the runtime calendars first: an import puts them before the
	// schedules that name them
	cals := 0
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		page, err := c.ListCalendars(ctx, after, 1000)
		cancel()
		if code, failed := calendarFailed(name, c, err, stderr); failed {
			return code
		}
		for _, cal := range page.Calendars {
			if cal.Error != "" {
				printf(stderr, "baton %s: calendar %s left out: %s\n", name, cal.Name, cal.Error)
				left++
				continue
			}
			b, _ := json.Marshal(exportLine{Calendar: cal.Name, Definition: cal.Definition, Created: cal.Created, Updated: cal.Updated, Version: cal.Version})
			bw.Write(append(b, '\n'))
			cals++
		}
		if after = page.Next; after == "" {
			break
		}
	}
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
	printf(stderr, "baton %s: %d runtime schedules exported%s\n", name, n, calendarCount(cals))
	return 0
}

// calendarCount is ", and N runtime calendars" for a message; "" for none.
func calendarCount(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(", and %d runtime calendars", n)
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
	c, err := baton.NewCluster(cfg)
	if err != nil {
		return usageExit(name, err, stderr)
	}
	defer c.Close()
	// every line is checked before anything is put: the calendars, then
	// the schedules with them, each after the parents it names (found
	// among the lines, or else in Redis)
	var lines, cals []exportLine
	bad := 0
	lineOf := map[string]int{} // id (a calendar: "calendar " + name) -> the line that holds it
	calendars := map[string]*config.CalendarSpec{}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for no := 1; sc.Scan(); no++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		var l exportLine
		if err := json.Unmarshal([]byte(text), &l); err != nil || (l.ID == "") == (l.Calendar == "") || len(l.Definition) == 0 {
			why := "want a JSON object with \"id\" (or \"calendar\") and \"definition\""
			if err != nil {
				why = err.Error()
			}
			printf(stderr, "%s:%d: %s\n", source, no, why)
			bad++
			continue
		}
		key, what := l.ID, l.ID
		if l.Calendar != "" {
			key, what = "calendar "+l.Calendar, "calendar "+l.Calendar
		}
		if first, dup := lineOf[key]; dup {
			printf(stderr, "%s:%d: %s: also on line %d (an export holds each once)\n", source, no, what, first)
			bad++
			continue
		}
		lineOf[key] = no
		if l.Calendar != "" {
			spec, _, err := config.DecodeCalendar(l.Calendar, l.Definition)
			if err != nil {
				printf(stderr, "%s:%d: %s: %s\n", source, no, what, err)
				bad++
				continue
			}
			calendars[l.Calendar] = spec
			cals = append(cals, l)
			continue
		}
		lines = append(lines, l)
	}
	if err := sc.Err(); err != nil {
		return usageExit(name, usagef("reading %s: %v", source, err), stderr)
	}
	lines, bad = checkImport(c.Config().WithCalendars(calendars), lines, lineOf, source, bad, stderr)
	if bad > 0 {
		printf(stderr, "baton %s: %d line(s) of %s are not valid schedules: nothing was put\n", name, bad, source)
		return exitUsage
	}
	putCals := 0
	for _, l := range cals {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := c.PutCalendarDocument(ctx, l.Calendar, l.Definition)
		cancel()
		if err != nil {
			printf(stderr, "baton %s: calendar %s not put (nor the schedules): %v\n", name, l.Calendar, err)
			return 1
		}
		putCals++
	}
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
	printf(stdout, "%d runtime schedules%s put from %s", put, calendarCount(putCals), source)
	if failed > 0 {
		printf(stdout, ", %d not put (above)\n", failed)
		return 1
	}
	fmt.Fprintln(stdout)
	return 0
}

// importSource finds the parents of the schedules an import checks: the
// lines checked already, else the cluster's (Redis).
type importSource struct {
	lines map[string]*config.Job
	base  *config.Config
}

func (s importSource) ScheduleJob(name string) (*config.Job, bool) {
	if j, ok := s.lines[name]; ok {
		return j, true
	}
	return s.base.Job(name)
}

// checkImport checks the schedules of an import, each after the parents it
// names among them, and returns them in that order (the order they are
// put in) with bad counting the lines that are not valid (each printed).
func checkImport(base *config.Config, lines []exportLine, lineOf map[string]int, source string, bad int, stderr io.Writer) ([]exportLine, int) {
	src := importSource{lines: map[string]*config.Job{}, base: base}
	cfg := base.WithSource(src)
	byName := map[string]int{}
	for i, l := range lines {
		byName[config.ScheduleJobName(l.ID)] = i
	}
	ordered := make([]exportLine, 0, len(lines))
	placed := map[string]bool{}
	var place func(i int, depth int)
	place = func(i int, depth int) {
		l := lines[i]
		name := config.ScheduleJobName(l.ID)
		if placed[name] {
			return
		}
		placed[name] = true
		var d struct {
			After []string `json:"after"`
		}
		_ = json.Unmarshal(l.Definition, &d)
		for _, p := range d.After {
			if k, ok := byName[p]; ok && depth < 64 {
				place(k, depth+1)
			}
		}
		j, err := config.DecodeSchedule(cfg, l.ID, l.Definition, time.Time{})
		if err != nil {
			printf(stderr, "%s:%d: %s: %s\n", source, lineOf[l.ID], l.ID, base.MaskSecrets(err.Error()))
			bad++
			return
		}
		src.lines[name] = j
		ordered = append(ordered, l)
	}
	for i := range lines {
		place(i, 0)
	}
	return ordered, bad
}
