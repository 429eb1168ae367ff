package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/redact"
)

const schedulesHelp = `usage: baton schedules put|get|list|delete|pause|resume|export|import [flags] ...

Schedules made at runtime: jobs kept in the queue Redis beside the job
list, put, changed and deleted while the replicas run (every replica
follows a change within a second). A runtime schedule runs a Go handler
a replica registered, or an http request to a URL under one of the
config's schedules.http_prefixes; never a command. Its id is the
caller's (report/tenant-42); its job name, in baton history, ticks,
trigger and the metrics, is "@" + id.

  baton schedules put ID (-f FILE | --schedule SPEC ...)  create or replace
  baton schedules get ID [--next N] [--json]              one schedule
  baton schedules list [--prefix P] [--after ID] [--json] a page of them
  baton schedules delete ID [--stop]                      delete (and stop its runs)
  baton schedules pause ID... [--note TEXT] [--for D]     pause, saying why (and until when)
  baton schedules resume ID... [--catch-up]               resume
  baton schedules export -o FILE [--prefix P]             a backup, JSON Lines
  baton schedules import -f FILE [--force]                put a backup back

"baton help schedules put" (and so on) prints each one's flags.
`

const schedulesPutHelp = `usage: baton schedules put [--config FILE] [--if-version N|--if-match ETAG] [--force] ID -f FILE
       baton schedules put [--config FILE] [--if-version N|--if-match ETAG] [--force] ID --schedule SPEC --handler NAME [flags]

Creates or replaces runtime schedule ID. The definition is a job of the
job list without its name, read from -f FILE (YAML or JSON; "-" reads
stdin) or built from the flags below (not both):

  schedule: "0 9 * * 1"
  timezone: Europe/Berlin
  handler: {name: report, payload: {tenant: 42}}

It is checked as the job list's jobs are, and against the runtime rules
(a registered Go handler or a URL under schedules.http_prefixes, no
command, a payload of at most schedules.max_payload bytes): each problem
is printed with its field, and with FILE's name and line. --if-version N
puts only while the schedule is at version N (0: only if it does not
exist yet), so a read-modify-write loses no other change; --if-match ETAG
(the etag get prints) puts only over that schedule at that version, not
one deleted and put again since (whose versions count from 1 again).

A schedule no live replica can run (none registers its Go handler,
allows its URL or consumes its queue: a typo, or what the next deploy
brings) is refused, saying why; --force puts it ahead of that deploy:
until a replica that can run it starts, its ticks are refused and
counted as failing, and schedules get|list show it waiting.

Exit status: 0 put; 1 Redis unreachable, the schedule is no longer at
--if-version or --if-match, or no live replica can run it; 2 usage error (a bad definition, bad flags, bad config).

flags:
`

const schedulesGetHelp = `usage: baton schedules get [--config FILE] [--next N] [--json] ID

Prints runtime schedule ID: its definition, version, when it was created
and last put, its pause, why replicas refuse it if they do (not signed as
security.signing_keys requires, no longer valid for the config) and its
next N ticks. --json prints it as GET /api/schedules/ID answers.

Exit status: 0 done; 1 Redis unreachable; 2 usage error (no such
schedule, bad flags, bad config).

flags:
`

const schedulesListHelp = `usage: baton schedules list [--config FILE] [--prefix P] [--after ID] [--limit N] [--next N] [--json]

Lists the runtime schedules in id order, a page at a time (--limit, at
most 1000): id, schedule, zone, what it runs, its next tick, paused,
version. When more follow, the last line says how to ask for the next
page (--after the last id). --json prints the page as GET /api/schedules
answers (its "next" is the next page's --after).

Exit status: 0 done; 1 Redis unreachable; 2 usage error.

flags:
`

const schedulesDeleteHelp = `usage: baton schedules delete [--config FILE] [--if-match ETAG] [--stop] ID

Deletes runtime schedule ID: no replica claims a tick of it once it
followed the change (within a second). A run under way finishes; with
--stop every worker running it is asked to stop it. --if-match ETAG (the
etag get prints) deletes only that schedule at that version.

Exit status: 0 deleted; 1 Redis unreachable, or the schedule is not the
one --if-match names; 2 usage error (no such schedule, bad flags, bad
config).

flags:
`

const schedulesPauseHelp = `usage: baton schedules pause [--config FILE] [--note TEXT] [--by NAME] [--for DURATION | --until TIME] ID...
       baton schedules resume [--config FILE] [--catch-up] ID...

Pauses or resumes runtime schedules, as baton pause and baton resume do
the job "@" + ID (see "baton help pause").

Exit status: 0 done; 1 not written to every master, or Redis
unreachable; 2 usage error (no such schedule, bad flags, bad config).

flags:
`

// stdin is where "baton schedules put -f -" reads the definition.
var stdin io.Reader = os.Stdin

// schedulesCommand is "baton schedules" and its subcommands.
func (c *cli) schedulesCommand() *cobra.Command {
	return c.groupCommand("schedules", schedulesHelp,
		subcommand(c, "schedules put", schedulesPutHelp, nil, definePut, runPut),
		subcommand(c, "schedules get", schedulesGetHelp, scheduleIDs(1), defineGet, runGet),
		subcommand(c, "schedules list", schedulesListHelp, nil, defineList, runList),
		subcommand(c, "schedules delete", schedulesDeleteHelp, scheduleIDs(1), defineDelete, runDelete),
		subcommand(c, "schedules pause", schedulesPauseHelp, scheduleIDs(0), pauseFlags(true), runSchedulePause),
		subcommand(c, "schedules resume", schedulesPauseHelp, scheduleIDs(0), pauseFlags(false), runSchedulePause),
		subcommand(c, "schedules export", schedulesExportHelp, nil, defineExport, runExport),
		subcommand(c, "schedules import", schedulesImportHelp, nil, defineImport, runImport),
	)
}

// putOpts are the flags of "baton schedules put".
type putOpts struct {
	path      string
	file      string
	ifVersion int64
	ifMatch   string
	force     bool
	spec      baton.ScheduleSpec
	// the flags that are not a ScheduleSpec's field as they are
	at, start, end   string
	concurrency      string
	catchup          string
	dst              string
	maxRetry         int
	payload          string
	httpURL          string
	httpMethod       string
	httpBody         string
	httpHeaders      []string
	httpExpectStatus []int
}

// definitionFlags are the flags of put that build a definition, by the
// definition's field each sets.
var definitionFlags = map[string]string{
	"schedule": "schedule", "at": "at", "timezone": "timezone", "start": "start", "end": "end",
	"max_runs": "max-runs", "concurrency": "concurrency", "buffer_max": "buffer-max", "catchup": "catchup",
	"catchup_max": "catchup-max", "starting_deadline": "starting-deadline", "jitter": "jitter",
	"timeout": "timeout", "max_retry": "max-retry", "retry_backoff": "retry-backoff", "lock_ttl": "lock-ttl",
	"queue": "queue", "exclude": "exclude", "only": "only", "limit": "limit", "dst": "dst", "handler": "handler", "handler.name": "handler", "handler.payload": "payload",
	"http": "http-url", "http.url": "http-url", "http.method": "http-method", "http.body": "http-body",
	"http.headers": "http-header", "http.expect_status": "http-expect-status",
}

// definePut defines the flags of "baton schedules put".
func definePut(fs *flagSet) *putOpts {
	o := &putOpts{}
	s := &o.spec
	fs.configFlag(&o.path)
	fs.StringVarP(&o.file, "file", "f", "", "read the definition from `FILE` (YAML or JSON; - reads stdin)")
	fs.Int64Var(&o.ifVersion, "if-version", -1, "put only while the schedule is at version `N` (0: only if it does not exist)")
	fs.StringVar(&o.ifMatch, "if-match", "", "put only over the schedule whose etag `ETAG` is (as get prints it: not one deleted and put again since, as a version alone may be)")
	fs.BoolVar(&o.force, "force", false, "put it even if no live replica can run it yet (ahead of the deploy that brings its handler)")
	fs.StringVar(&s.Schedule, "schedule", "", "cron `SPEC` (5 or 6 fields, @hourly, @every 30s)")
	fs.StringVar(&o.at, "at", "", "run once at `TIME` (RFC 3339) instead of a schedule")
	fs.StringVar(&s.Timezone, "timezone", "", "the schedule's time `ZONE` (Europe/Berlin; default: the config's)")
	fs.StringVar(&o.start, "start", "", "no tick before `TIME` (RFC 3339)")
	fs.StringVar(&o.end, "end", "", "no tick after `TIME` (RFC 3339)")
	fs.StringSliceVar(&s.Exclude, "exclude", nil, "no tick on the days of these `CALENDARS` (the job list's or baton calendars put; repeatable, or a,b)")
	fs.StringSliceVar(&s.Only, "only", nil, "ticks only on the days of these `CALENDARS` (repeatable, or a,b)")
	fs.StringVar(&o.dst, "dst", "", "on days the clocks change: vixie (default), once, skip or both")
	fs.StringVar(&s.Limit, "limit", "", "the job list's limit (`NAME`) whose slot each run holds")
	fs.StringVar(&s.Handler, "handler", "", "the registered Go handler's `NAME`")
	fs.StringVar(&o.payload, "payload", "", "the handler's payload: `JSON` handed to the run (run.Payload)")
	fs.StringVar(&o.httpURL, "http-url", "", "request `URL` (under schedules.http_prefixes) instead of a handler")
	fs.StringVar(&o.httpMethod, "http-method", "", "the request's `METHOD` (default GET)")
	fs.StringVar(&o.httpBody, "http-body", "", "the request's `BODY`")
	fs.StringArrayVar(&o.httpHeaders, "http-header", nil, "a request header `NAME: VALUE` (repeatable)")
	fs.IntSliceVar(&o.httpExpectStatus, "http-expect-status", nil, "the `CODES` that count as success (default: any 2xx)")
	fs.IntVar(&s.MaxRuns, "max-runs", 0, "stop after `N` runs (0: no limit)")
	fs.StringVar(&o.concurrency, "concurrency", "", "forbid, allow, replace, buffer_one or buffer_all (default forbid)")
	fs.IntVar(&s.BufferMax, "buffer-max", 0, "how many ticks buffer_all holds (`N`)")
	fs.StringVar(&o.catchup, "catchup", "", "missed ticks after an outage: none, latest or all")
	fs.IntVar(&s.CatchupMax, "catchup-max", 0, "at most `N` ticks caught up")
	fs.DurationVar(&s.StartingDeadline, "starting-deadline", 0, "how late a tick may still start (`DURATION`)")
	fs.DurationVar(&s.Jitter, "jitter", 0, "spread the ticks by up to `DURATION`")
	fs.DurationVar(&s.Timeout, "timeout", 0, "a run's time limit (`DURATION`)")
	fs.IntVar(&o.maxRetry, "max-retry", 0, "retries of a failed run (`N`; default: the job list's)")
	fs.DurationVar(&s.RetryBackoff, "retry-backoff", 0, "the first retry's delay (`DURATION`)")
	fs.DurationVar(&s.LockTTL, "lock-ttl", 0, "the execution lease's ttl (`DURATION`)")
	fs.StringVar(&s.Queue, "queue", "", "the queue its tasks go to (`NAME`)")
	return o
}

// runPut implements "baton schedules put".
func runPut(fs *flagSet, o *putOpts, args []string, stdout, stderr io.Writer) int {
	name := fs.name
	if len(args) != 1 {
		return usageExit(name, usagef("name one schedule id (such as report/tenant-42), got %d arguments", len(args)), stderr)
	}
	id := args[0]
	if err := config.CheckScheduleID(id); err != nil {
		return usageExit(name, err, stderr)
	}
	var set []string
	for _, f := range definitionFlags {
		if fs.isSet(f) && !slices.Contains(set, f) {
			set = append(set, f)
		}
	}
	var doc []byte
	source := "" // the file the definition comes from, for its errors
	switch {
	case fs.isSet("file") && len(set) > 0:
		return usageExit(name, usagef("-f and --%s exclude each other: the definition comes from the file or from the flags", set[0]), stderr)
	case fs.isSet("file"):
		var err error
		if o.file == "-" {
			source = "<stdin>"
			doc, err = io.ReadAll(io.LimitReader(stdin, 2<<20))
		} else {
			source = o.file
			doc, err = os.ReadFile(o.file)
		}
		if err != nil {
			return usageExit(name, usagef("reading the definition: %v", err), stderr)
		}
	case len(set) == 0:
		return usageExit(name, usagef("give the definition: -f FILE, or --schedule SPEC (or --at TIME) with --handler NAME or --http-url URL"), stderr)
	default:
		spec, err := o.specFromFlags(fs)
		if err != nil {
			return usageExit(name, err, stderr)
		}
		if doc, err = spec.Document(); err != nil {
			return badDefinition(fs, "", err, stderr)
		}
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
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var s baton.Schedule
	var opts []baton.PutOption
	if o.force {
		opts = append(opts, baton.AheadOfDeploy())
	}
	switch {
	case fs.isSet("if-version") && fs.isSet("if-match"):
		return usageExit(name, usagef("--if-version and --if-match: give one"), stderr)
	case fs.isSet("if-match"):
		s, err = c.PutScheduleIfMatch(ctx, id, doc, o.ifMatch, opts...)
		if errors.Is(err, baton.ErrBadQuery) {
			return usageExit(name, usagef("--if-match: %v", err), stderr)
		}
	case fs.isSet("if-version"):
		if o.ifVersion < 0 {
			return usageExit(name, usagef("--if-version must be >= 0 (0: the schedule must not exist yet), got %d", o.ifVersion), stderr)
		}
		s, err = c.PutScheduleIfVersion(ctx, id, doc, o.ifVersion, opts...)
	default:
		s, err = c.PutScheduleDocument(ctx, id, doc, opts...)
	}
	var ce *config.Error
	switch {
	case errors.As(err, &ce):
		return badDefinition(fs, source, err, stderr)
	case errors.Is(err, baton.ErrScheduleChanged):
		printf(stderr, "baton %s: %v; read it again (baton schedules get %s) and put it over its version\n", name, err, id)
		return 1
	case err != nil:
		printf(stderr, "baton %s: %v\n", name, errors.New(c.Config().MaskSecrets(err.Error())))
		return 1
	}
	next := ""
	if got, err := c.GetSchedule(ctx, id, 1); err == nil && len(got.Next) > 0 {
		next = ", next tick " + got.Next[0].In(scheduleZone(c.Config(), got)).Format(time.RFC3339)
	}
	printf(stdout, "%s put: version %d (etag %s), job %s%s\n", s.ID, s.Version, s.ETag(), s.Job, next)
	if s.Waiting != "" {
		printf(stdout, "waiting: %s; its ticks are refused until a replica that can run it starts\n", s.Waiting)
	}
	return 0
}

// specFromFlags builds the definition of the flags put was given.
func (o *putOpts) specFromFlags(fs *flagSet) (baton.ScheduleSpec, error) {
	s := o.spec
	for _, t := range []struct {
		flag string
		from string
		to   *time.Time
	}{{"at", o.at, &s.At}, {"start", o.start, &s.Start}, {"end", o.end, &s.End}} {
		if t.from == "" {
			continue
		}
		v, err := time.Parse(time.RFC3339, t.from)
		if err != nil {
			return s, usagef("--%s must be an RFC 3339 time (2026-12-07T09:00:00+01:00), got %q", t.flag, t.from)
		}
		*t.to = v
	}
	s.Concurrency = config.Concurrency(o.concurrency)
	s.Catchup = config.Catchup(o.catchup)
	s.DST = config.DST(o.dst)
	if fs.isSet("max-retry") {
		n := o.maxRetry
		s.MaxRetry = &n
	}
	if o.payload != "" {
		if !json.Valid([]byte(o.payload)) {
			return s, usagef(`--payload must be JSON, such as '{"tenant": 42}', got %q`, o.payload)
		}
		s.Payload = json.RawMessage(o.payload)
	}
	if fs.isSet("http-url") || fs.isSet("http-method") || fs.isSet("http-body") || fs.isSet("http-header") || fs.isSet("http-expect-status") {
		h := &config.HTTPSpec{URL: o.httpURL, Method: o.httpMethod, Body: o.httpBody, ExpectStatus: o.httpExpectStatus}
		for _, kv := range o.httpHeaders {
			k, v, ok := strings.Cut(kv, ":")
			if !ok || strings.TrimSpace(k) == "" {
				return s, usagef("--http-header must be NAME: VALUE, got %q", kv)
			}
			if h.Headers == nil {
				h.Headers = map[string]string{}
			}
			h.Headers[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
		s.HTTP = h
	}
	return s, nil
}

// badDefinition prints each problem of a refused definition and returns
// the usage status: read from source, with its name and line; built from
// the flags, with the flag that set the field.
func badDefinition(fs *flagSet, source string, err error, stderr io.Writer) int {
	var ce *config.Error
	if !errors.As(err, &ce) {
		return usageExit(fs.name, err, stderr)
	}
	errs := slices.Clone(ce.Errors)
	slices.SortStableFunc(errs, func(a, b config.FieldError) int { return a.Line - b.Line })
	for _, fe := range errs {
		if source != "" {
			fe.File = source
			printf(stderr, "%v\n", fe)
			continue
		}
		field := fe.Field
		if f, ok := definitionFlags[field]; ok {
			field = "--" + f
		} else if before, _, ok := strings.Cut(field, "["); ok && definitionFlags[before] != "" {
			field = "--" + definitionFlags[before]
		} else if k, _, ok := strings.Cut(field, "."); ok && definitionFlags[k] != "" {
			field = "--" + definitionFlags[k] + " (" + field + ")"
		}
		if field == "" {
			printf(stderr, "baton %s: %s\n", fs.name, fe.Msg)
			continue
		}
		printf(stderr, "baton %s: %s: %s\n", fs.name, field, fe.Msg)
	}
	fmt.Fprintln(stderr, usageLine(fs.name, schedulesPutHelp))
	return exitUsage
}

// getOpts are the flags of "baton schedules get".
type getOpts struct {
	path   string
	next   int
	asJSON bool
}

// defineGet defines the flags of "baton schedules get".
func defineGet(fs *flagSet) *getOpts {
	o := &getOpts{}
	fs.configFlag(&o.path)
	fs.IntVar(&o.next, "next", 3, "print its next `N` ticks (0 to 10)")
	fs.BoolVar(&o.asJSON, "json", false, "print JSON")
	return o
}

// runGet implements "baton schedules get".
func runGet(fs *flagSet, o *getOpts, args []string, stdout, stderr io.Writer) int {
	name := fs.name
	switch {
	case len(args) != 1:
		return usageExit(name, usagef("name one schedule id, got %d arguments", len(args)), stderr)
	case o.next < 0 || o.next > 10:
		return usageExit(name, usagef("--next must be from 0 to 10, got %d", o.next), stderr)
	}
	c, code := openCluster(fs, o.path, name, stderr)
	if c == nil {
		return code
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := c.GetSchedule(ctx, args[0], o.next)
	if code, failed := scheduleFailed(name, c, err, stderr); failed {
		return code
	}
	s = s.Masked()
	if o.asJSON {
		return printJSON(stdout, stderr, name, s)
	}
	var def bytes.Buffer
	if err := json.Indent(&def, s.Definition, "  ", "  "); err != nil {
		def.Reset()
		def.Write(s.Definition)
	}
	printf(stdout, "id:         %s\njob:        %s\nversion:    %d\netag:       %s\ncreated:    %s\nupdated:    %s\n",
		s.ID, s.Job, s.Version, s.ETag(), s.Created.UTC().Format(time.RFC3339), s.Updated.UTC().Format(time.RFC3339))
	if p := s.Paused; p != nil {
		printf(stdout, "paused:     by %s since %s", redact.Quote(p.By), p.At.UTC().Format(time.RFC3339))
		if !p.Until.IsZero() {
			printf(stdout, " until %s", p.Until.UTC().Format(time.RFC3339))
		}
		if p.Note != "" {
			printf(stdout, ": %s", redact.Quote(p.Note))
		}
		fmt.Fprintln(stdout)
	}
	if s.Error != "" {
		printf(stdout, "REFUSED:    %s (replicas do not run it)\n", s.Error)
	}
	if s.Waiting != "" {
		printf(stdout, "WAITING:    %s (its ticks are refused until a replica that can run it starts)\n", s.Waiting)
	}
	if s.FailingSince != nil {
		printf(stdout, "FAILING:    since %s (baton history %s)\n", s.FailingSince.Format(time.RFC3339), s.Job)
	}
	if len(s.Next) > 0 {
		printf(stdout, "next:      %s\n", times(inZone(s.Next, scheduleZone(c.Config(), s)))[1:])
	}
	for i, line := range strings.Split(def.String(), "\n") {
		if i == 0 {
			printf(stdout, "definition: %s\n", line)
		} else {
			printf(stdout, "%s\n", line)
		}
	}
	return 0
}

// scheduleFailed prints err, an error of a call about runtime schedules,
// and returns the exit status it calls for; false when err is nil.
func scheduleFailed(name string, c *baton.Cluster, err error, stderr io.Writer) (int, bool) {
	return callFailed(name, c, err, stderr, baton.ErrNoSchedule, "schedule id")
}

// callFailed prints err, an error of a Cluster call, its secrets masked,
// and returns the exit status it calls for: a usage error (2) when it is
// notFound, ErrBadQuery or speaks of a bad badName, else 1; false when err
// is nil.
func callFailed(name string, c *baton.Cluster, err error, stderr io.Writer, notFound error, badName string) (int, bool) {
	if err == nil {
		return 0, false
	}
	msg := c.Config().MaskSecrets(err.Error())
	if errors.Is(err, notFound) || errors.Is(err, baton.ErrBadQuery) || strings.Contains(msg, badName) {
		return usageExit(name, usagef("%s", msg), stderr), true
	}
	printf(stderr, "baton %s: %v\n", name, errors.New(msg))
	return 1, true
}

// listOpts are the flags of "baton schedules list".
type listOpts struct {
	path          string
	prefix, after string
	limit, next   int
	asJSON        bool
}

// defineList defines the flags of "baton schedules list".
func defineList(fs *flagSet) *listOpts {
	o := &listOpts{}
	fs.configFlag(&o.path)
	fs.StringVar(&o.prefix, "prefix", "", "only the ids that start with `P` (report/)")
	fs.StringVar(&o.after, "after", "", "the ids after `ID` (the previous page's last)")
	fs.IntVar(&o.limit, "limit", 100, "at most `N` schedules (1 to 1000)")
	fs.IntVar(&o.next, "next", 1, "the next `N` ticks of each (0 to 10)")
	fs.BoolVar(&o.asJSON, "json", false, "print JSON")
	return o
}

// runList implements "baton schedules list".
func runList(fs *flagSet, o *listOpts, args []string, stdout, stderr io.Writer) int {
	name := fs.name
	if len(args) > 0 {
		return usageExit(name, usagef("unexpected argument %q (a prefix is --prefix %s)", args[0], args[0]), stderr)
	}
	c, code := openCluster(fs, o.path, name, stderr)
	if c == nil {
		return code
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	page, err := c.ListSchedules(ctx, baton.ScheduleQuery{Prefix: o.prefix, After: o.after, Limit: o.limit, Next: o.next})
	if code, failed := scheduleFailed(name, c, err, stderr); failed {
		return code
	}
	if o.asJSON {
		if page.Schedules == nil {
			page.Schedules = []baton.Schedule{}
		}
		for i := range page.Schedules {
			page.Schedules[i] = page.Schedules[i].Masked()
		}
		return printJSON(stdout, stderr, name, page)
	}
	if len(page.Schedules) == 0 {
		fmt.Fprintln(stdout, "no runtime schedules")
		return 0
	}
	tw := newTable(stdout, "ID", "SCHEDULE", "TIMEZONE", "RUNS", "NEXT", "PAUSED", "VERSION", "PROBLEM")
	for _, s := range page.Schedules {
		var d struct {
			Schedule, At, Timezone string
			Handler                *struct{ Name string }
			HTTP                   *struct{ Method, URL string }
		}
		_ = json.Unmarshal(s.Definition, &d)
		when := d.Schedule
		if d.At != "" {
			when = "at " + d.At
		}
		runs := "-"
		switch {
		case d.Handler != nil:
			runs = "handler " + d.Handler.Name
		case d.HTTP != nil:
			u, _, _ := strings.Cut(d.HTTP.URL, "?") // a query may carry a token
			runs = strings.TrimSpace(d.HTTP.Method + " " + redact.URL(u))
		}
		next := "-"
		if len(s.Next) > 0 {
			next = s.Next[0].In(scheduleZone(c.Config(), s)).Format(time.RFC3339)
		}
		paused := "-"
		if s.Paused != nil {
			paused = "by " + s.Paused.By
		}
		if s.Error != "" {
			when, next = "REFUSED: "+s.Error, "-"
		}
		tw.row(s.ID, dash(when), dash(d.Timezone), runs, next, paused, strconv.FormatInt(s.Version, 10), scheduleProblem(s))
	}
	if err := tw.flush(); err != nil {
		return 1
	}
	if page.Next != "" {
		printf(stdout, "next page: baton schedules list --after %s%s\n", page.Next, prefixFlag(o.prefix))
	}
	return 0
}

// scheduleProblem is what needs an eye in runtime schedule s: it waits
// for a replica that can run it, or fails; "-" when nothing does.
func scheduleProblem(s baton.Schedule) string {
	var out []string
	if s.Waiting != "" {
		out = append(out, "waiting: "+s.Waiting)
	}
	if s.FailingSince != nil {
		out = append(out, "failing since "+s.FailingSince.Format(time.RFC3339))
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, "; ")
}

func prefixFlag(p string) string {
	if p == "" {
		return ""
	}
	return " --prefix " + p
}

// deleteOpts are the flags of "baton schedules delete".
type deleteOpts struct {
	path    string
	ifMatch string
	stop    bool
}

// defineDelete defines the flags of "baton schedules delete".
func defineDelete(fs *flagSet) *deleteOpts {
	o := &deleteOpts{}
	fs.configFlag(&o.path)
	fs.BoolVar(&o.stop, "stop", false, "ask the workers running it to stop its runs under way")
	fs.StringVar(&o.ifMatch, "if-match", "", "delete only the schedule whose etag `ETAG` is (as get prints it)")
	return o
}

// runDelete implements "baton schedules delete".
func runDelete(fs *flagSet, o *deleteOpts, args []string, stdout, stderr io.Writer) int {
	name := fs.name
	if len(args) != 1 {
		return usageExit(name, usagef("name one schedule id, got %d arguments", len(args)), stderr)
	}
	c, code := openCluster(fs, o.path, name, stderr)
	if c == nil {
		return code
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var err error
	if fs.isSet("if-match") {
		err = c.DeleteScheduleIfMatch(ctx, args[0], o.ifMatch, o.stop)
		if errors.Is(err, baton.ErrBadQuery) {
			return usageExit(name, usagef("--if-match: %v", err), stderr)
		}
	} else {
		err = c.DeleteSchedule(ctx, args[0], o.stop)
	}
	if code, failed := scheduleFailed(name, c, err, stderr); failed {
		return code
	}
	if o.stop {
		printf(stdout, "%s deleted; its runs under way were asked to stop\n", args[0])
	} else {
		printf(stdout, "%s deleted (a run under way finishes)\n", args[0])
	}
	return 0
}

// runSchedulePause implements "baton schedules pause" (on) and "baton
// schedules resume": "baton pause" and "baton resume" of the schedules' job
// names ("@" + id).
func runSchedulePause(fs *flagSet, o *pauseOpts, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		return usageExit(fs.name, usagef("name at least one schedule id"), stderr)
	}
	jobs := make([]string, len(args))
	for i, id := range args {
		if err := config.CheckScheduleID(id); err != nil {
			return usageExit(fs.name, usagef("%s", err), stderr)
		}
		jobs[i] = config.ScheduleJobName(id)
	}
	return runPause(fs, o, jobs, stdout, stderr)
}

// scheduleZone is the time zone runtime schedule s ticks in: its
// definition's timezone, else the config's; UTC when neither loads.
func scheduleZone(cfg *config.Config, s baton.Schedule) *time.Location {
	var d struct{ Timezone string }
	_ = json.Unmarshal(s.Definition, &d)
	if d.Timezone != "" {
		if loc, err := time.LoadLocation(d.Timezone); err == nil {
			return loc
		}
	}
	if cfg.Location != nil {
		return cfg.Location
	}
	return time.UTC
}

// inZone is ts in loc (as baton next prints a job's ticks).
func inZone(ts []time.Time, loc *time.Location) []time.Time {
	out := make([]time.Time, len(ts))
	for i, t := range ts {
		out[i] = t.In(loc)
	}
	return out
}
