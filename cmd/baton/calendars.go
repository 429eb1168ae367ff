package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/config"
)

const calendarsHelp = `usage: baton calendars put|get|list|delete [flags] ...

Calendars put at runtime: named sets of days, kept in the queue Redis
beside the runtime schedules, that runtime schedules name in exclude
("not on these days") and only ("on these days only") as they name the
job list's calendars. A change reaches every replica, and every schedule
that names the calendar, within a second. A name of the job list's
calendars cannot be put (the job list's stands for it).

  baton calendars put NAME (-f FILE | --date D --range R --weekday W | --days-file FILE)
  baton calendars get NAME [--json]
  baton calendars list [--after NAME] [--json]
  baton calendars delete NAME        refused while schedules name it

"baton help calendars put" (and so on) prints each one's flags.
`

const calendarsPutHelp = `usage: baton calendars put [--config FILE] NAME -f FILE
       baton calendars put [--config FILE] NAME [--date YYYY-MM-DD]... [--range FROM..TO]... [--weekday DAY]... [--days-file FILE]

Creates or replaces runtime calendar NAME. The definition is a calendar
of the job list without its file, read from -f FILE (YAML or JSON; "-"
reads stdin):

  dates: [2026-12-24, 2026-12-25]
  ranges: [2026-12-31..2027-01-01]
  weekdays: [sat, sun]

or built from the flags (not both); --days-file FILE reads dates and
ranges one per line ("#" starts a comment), as a job list calendar's
file. Each problem is printed with its field (and FILE's line).

Exit status: 0 put; 1 Redis unreachable; 2 usage error (a bad
definition, bad flags, bad config).

flags:
`

const calendarsGetHelp = `usage: baton calendars get [--config FILE] [--json] NAME

Prints runtime calendar NAME: its days, version, when it was created and
last put. --json prints it as GET /api/calendars/NAME answers.

Exit status: 0 done; 1 Redis unreachable; 2 usage error (no such
calendar, bad flags, bad config).

flags:
`

const calendarsListHelp = `usage: baton calendars list [--config FILE] [--after NAME] [--limit N] [--json]

Lists the runtime calendars in name order, a page at a time: name, how
many dates, ranges and weekdays, version, updated. --json prints the page
as GET /api/calendars answers.

Exit status: 0 done; 1 Redis unreachable; 2 usage error.

flags:
`

const calendarsDeleteHelp = `usage: baton calendars delete [--config FILE] NAME

Deletes runtime calendar NAME, unless runtime schedules name it (it
prints some of them: delete them or put them without it first). It reads
every schedule to find out.

Exit status: 0 deleted; 1 Redis unreachable, or schedules name it; 2
usage error (no such calendar, bad flags, bad config).

flags:
`

// calendarsCommand is "baton calendars" and its subcommands.
func (c *cli) calendarsCommand() *cobra.Command {
	return c.groupCommand("calendars", calendarsHelp,
		subcommand(c, "calendars put", calendarsPutHelp, calendarNames(1), defineCalendarPut, runCalendarPut),
		subcommand(c, "calendars get", calendarsGetHelp, calendarNames(1), defineCalendarGet, runCalendarGet),
		subcommand(c, "calendars list", calendarsListHelp, nil, defineCalendarList, runCalendarList),
		subcommand(c, "calendars delete", calendarsDeleteHelp, calendarNames(1), defineCalendarDelete, runCalendarDelete),
	)
}

// calendarPutOpts are the flags of "baton calendars put".
type calendarPutOpts struct {
	path, file, daysFile string
	spec                 baton.CalendarSpec
}

func defineCalendarPut(fs *flagSet) *calendarPutOpts {
	o := &calendarPutOpts{}
	fs.configFlag(&o.path)
	fs.StringVarP(&o.file, "file", "f", "", "read the definition from `FILE` (YAML or JSON; - reads stdin)")
	fs.StringArrayVar(&o.spec.Dates, "date", nil, "a day, `YYYY-MM-DD` (repeatable)")
	fs.StringArrayVar(&o.spec.Ranges, "range", nil, "days `FROM..TO`, both included (repeatable)")
	fs.StringArrayVar(&o.spec.Weekdays, "weekday", nil, "a `DAY` of every week: mon ... sun (repeatable)")
	fs.StringVar(&o.daysFile, "days-file", "", "read dates and ranges from `FILE`, one per line (# comments)")
	return o
}

// runCalendarPut implements "baton calendars put".
func runCalendarPut(fs *flagSet, o *calendarPutOpts, args []string, stdout, stderr io.Writer) int {
	name := fs.name
	if len(args) != 1 {
		return usageExit(name, usagef("name one calendar (such as holidays-de), got %d arguments", len(args)), stderr)
	}
	if err := config.CheckCalendarName(args[0]); err != nil {
		return usageExit(name, err, stderr)
	}
	byFlags := fs.isSet("date") || fs.isSet("range") || fs.isSet("weekday") || fs.isSet("days-file")
	var doc []byte
	source := ""
	switch {
	case fs.isSet("file") && byFlags:
		return usageExit(name, usagef("-f and the day flags (--date, --range, --weekday, --days-file) exclude each other"), stderr)
	case fs.isSet("file"):
		var err error
		if o.file == "-" {
			source = "<stdin>"
			doc, err = io.ReadAll(io.LimitReader(stdin, config.MaxCalendarDocument+1))
		} else {
			source = o.file
			doc, err = os.ReadFile(o.file)
		}
		if err != nil {
			return usageExit(name, usagef("reading the definition: %v", err), stderr)
		}
	case !byFlags:
		return usageExit(name, usagef("give the days: -f FILE, or --date, --range, --weekday, --days-file"), stderr)
	default:
		if o.daysFile != "" {
			if err := readDaysFile(o.daysFile, &o.spec); err != nil {
				return usageExit(name, err, stderr)
			}
		}
		var err error
		if doc, err = json.Marshal(o.spec); err != nil {
			return usageExit(name, err, stderr)
		}
	}
	c, code := openCluster(fs, o.path, name, stderr)
	if c == nil {
		return code
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cal, err := c.PutCalendarDocument(ctx, args[0], doc)
	var ce *config.Error
	switch {
	case errors.As(err, &ce):
		for _, fe := range ce.Errors {
			if source != "" {
				fe.File = source
			}
			printf(stderr, "baton %s: %v\n", name, fe)
		}
		fmt.Fprintln(stderr, usageLine(name, calendarsPutHelp))
		return exitUsage
	case err != nil:
		printf(stderr, "baton %s: %v\n", name, errors.New(c.Config().MaskSecrets(err.Error())))
		return 1
	}
	printf(stdout, "calendar %s put: version %d\n", cal.Name, cal.Version)
	return 0
}

// readDaysFile adds the dates and ranges of a days file (one per line,
// "#" comments) to spec; an error names the file and the line.
func readDaysFile(path string, spec *baton.CalendarSpec) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return usagef("--days-file: %v", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		switch line = strings.TrimSpace(line); {
		case line == "":
		case strings.Contains(line, ".."):
			spec.Ranges = append(spec.Ranges, line)
		default:
			if _, err := time.Parse(time.DateOnly, line); err != nil {
				return usagef("%s:%d: %q is no date: want YYYY-MM-DD or FROM..TO", path, n, line)
			}
			spec.Dates = append(spec.Dates, line)
		}
	}
	return sc.Err()
}

// calendarGetOpts are the flags of "baton calendars get".
type calendarGetOpts struct {
	path   string
	asJSON bool
}

func defineCalendarGet(fs *flagSet) *calendarGetOpts {
	o := &calendarGetOpts{}
	fs.configFlag(&o.path)
	fs.BoolVar(&o.asJSON, "json", false, "print JSON")
	return o
}

// runCalendarGet implements "baton calendars get".
func runCalendarGet(fs *flagSet, o *calendarGetOpts, args []string, stdout, stderr io.Writer) int {
	name := fs.name
	if len(args) != 1 {
		return usageExit(name, usagef("name one calendar, got %d arguments", len(args)), stderr)
	}
	c, code := openCluster(fs, o.path, name, stderr)
	if c == nil {
		return code
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cal, err := c.GetCalendar(ctx, args[0])
	if code, failed := calendarFailed(name, c, err, stderr); failed {
		return code
	}
	if o.asJSON {
		return printJSON(stdout, stderr, name, cal)
	}
	var days baton.CalendarSpec
	_ = json.Unmarshal(cal.Definition, &days)
	printf(stdout, "name:       %s\nversion:    %d\ncreated:    %s\nupdated:    %s\n",
		cal.Name, cal.Version, cal.Created.UTC().Format(time.RFC3339), cal.Updated.UTC().Format(time.RFC3339))
	for _, l := range []struct {
		key  string
		vals []string
	}{{"dates", days.Dates}, {"ranges", days.Ranges}, {"weekdays", days.Weekdays}} {
		if len(l.vals) > 0 {
			printf(stdout, "%-11s %s\n", l.key+":", strings.Join(l.vals, " "))
		}
	}
	return 0
}

// calendarFailed prints err, an error of a call about runtime calendars,
// and returns the exit status it calls for; false when err is nil.
func calendarFailed(name string, c *baton.Cluster, err error, stderr io.Writer) (int, bool) {
	return callFailed(name, c, err, stderr, baton.ErrNoCalendar, "calendar name")
}

// calendarListOpts are the flags of "baton calendars list".
type calendarListOpts struct {
	path, after string
	limit       int
	asJSON      bool
}

func defineCalendarList(fs *flagSet) *calendarListOpts {
	o := &calendarListOpts{}
	fs.configFlag(&o.path)
	fs.StringVar(&o.after, "after", "", "the calendars after `NAME` (the previous page's last)")
	fs.IntVar(&o.limit, "limit", 100, "at most `N` calendars (1 to 1000)")
	fs.BoolVar(&o.asJSON, "json", false, "print JSON")
	return o
}

// runCalendarList implements "baton calendars list".
func runCalendarList(fs *flagSet, o *calendarListOpts, args []string, stdout, stderr io.Writer) int {
	name := fs.name
	switch {
	case len(args) > 0:
		return usageExit(name, usagef("unexpected argument %q", args[0]), stderr)
	case o.limit < 1 || o.limit > 1000:
		return usageExit(name, usagef("--limit must be from 1 to 1000, got %d", o.limit), stderr)
	}
	c, code := openCluster(fs, o.path, name, stderr)
	if c == nil {
		return code
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	page, err := c.ListCalendars(ctx, o.after, o.limit)
	if code, failed := calendarFailed(name, c, err, stderr); failed {
		return code
	}
	if o.asJSON {
		return printJSON(stdout, stderr, name, page)
	}
	if len(page.Calendars) == 0 {
		printf(stdout, "no runtime calendars (baton calendars put NAME --date YYYY-MM-DD puts one)\n")
		return 0
	}
	tw := newTable(stdout, "NAME", "DATES", "RANGES", "WEEKDAYS", "VERSION", "UPDATED")
	for _, cal := range page.Calendars {
		if cal.Error != "" {
			tw.row(cal.Name, "REFUSED: "+cal.Error, "-", "-", "-", "-")
			continue
		}
		var days baton.CalendarSpec
		_ = json.Unmarshal(cal.Definition, &days)
		tw.row(cal.Name, fmt.Sprint(len(days.Dates)), fmt.Sprint(len(days.Ranges)), dash(strings.Join(days.Weekdays, ",")),
			fmt.Sprint(cal.Version), cal.Updated.UTC().Format(time.RFC3339))
	}
	if err := tw.flush(); err != nil {
		return 1
	}
	if page.Next != "" {
		printf(stdout, "next page: baton calendars list --after %s\n", page.Next)
	}
	return 0
}

// calendarDeleteOpts are the flags of "baton calendars delete".
type calendarDeleteOpts struct{ path string }

func defineCalendarDelete(fs *flagSet) *calendarDeleteOpts {
	o := &calendarDeleteOpts{}
	fs.configFlag(&o.path)
	return o
}

// runCalendarDelete implements "baton calendars delete".
func runCalendarDelete(fs *flagSet, o *calendarDeleteOpts, args []string, stdout, stderr io.Writer) int {
	name := fs.name
	if len(args) != 1 {
		return usageExit(name, usagef("name one calendar, got %d arguments", len(args)), stderr)
	}
	c, code := openCluster(fs, o.path, name, stderr)
	if c == nil {
		return code
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if code, failed := calendarFailed(name, c, c.DeleteCalendar(ctx, args[0]), stderr); failed {
		return code
	}
	printf(stdout, "calendar %s deleted\n", args[0])
	return 0
}

// calendarNames completes the names of the runtime calendars (at most
// atMost arguments).
func calendarNames(atMost int) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) >= atMost {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		cfg, err := config.LoadFile(configPath(cmd))
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		c, err := baton.NewCluster(cfg)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), completionBound)
		defer cancel()
		page, err := c.ListCalendars(ctx, "", 1000)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []cobra.Completion
		for _, cal := range page.Calendars {
			if strings.HasPrefix(cal.Name, toComplete) {
				out = append(out, cal.Name)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}
