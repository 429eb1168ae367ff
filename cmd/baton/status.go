package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/redact"
	"github.com/batonhq/baton/locking"
)

const statusHelp = `usage: baton status [--config FILE] [--json]

Shows every job: mode, schedule and time zone, its next tick, whether it is
paused (by the config, or by baton pause on a majority of lock masters:
then who paused it, since when and the note, below the table), its last
tick or run and how it ended, the runs under way and where, and the lock
its runs hold (fence, remaining ttl) or a singleton's leader.
Then every replica seen in the last 10 minutes: id, role, version, job list
hash, last heartbeat, clock skew against Redis, queues; replicas whose job
list differs from most live replicas' are flagged, with the jobs the lists
differ on. Last, what needs attention (tasks in a queue no live replica
consumes, a pause on a minority of masters). Lock masters that do not vote
(in their restart quarantine: why, until when; unreachable) come first.

Exit status: 0 done; 1 Redis unreachable (what could be read is printed);
2 usage error.

flags:
`

// configJSON are the flags of status and locks: --config and --json.
type configJSON struct {
	path   string
	asJSON bool
}

// defineConfigJSON defines --config and --json.
func defineConfigJSON(fs *flagSet) *configJSON {
	o := &configJSON{}
	fs.configFlag(&o.path)
	fs.BoolVar(&o.asJSON, "json", false, "print JSON")
	return o
}

// runStatus implements "baton status".
func runStatus(fs *flagSet, o *configJSON, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		return usageExit("status", usagef("unexpected argument %q", args[0]), stderr)
	}
	c, code := openCluster(fs, o.path, "status", stderr)
	if c == nil {
		return code
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := c.Status(ctx)
	if st == nil {
		printf(stderr, "baton status: %s\n", errors.New(c.Config().MaskSecrets(err.Error())))
		return 1
	}
	code = 0
	if err != nil {
		printf(stderr, "baton status: %s\n", errors.New(c.Config().MaskSecrets(err.Error())))
		code = 1
	}
	if o.asJSON {
		return max(code, printJSON(stdout, stderr, "status", st))
	}
	printMastersAttention(stdout, st)
	printStatus(stdout, st)
	return code
}

// printMastersAttention writes, above the tables, one line per lock master
// that does not vote: in its restart quarantine (why, until when), not
// marked yet, or unreachable.
func printMastersAttention(w io.Writer, st *baton.Status) {
	lines := st.MastersAttention()
	for _, l := range lines {
		printf(w, "ATTENTION: %s\n", l)
	}
	if len(lines) > 0 {
		fmt.Fprintln(w)
	}
}

// openCluster loads the config at path and opens its cluster; on failure it
// reports and returns nil and the exit status.
func openCluster(fs *flagSet, path, cmd string, stderr io.Writer) (*baton.Cluster, int) {
	cfg, err := loadConfigFile(fs, path)
	if err != nil {
		return nil, usageExit(cmd, err, stderr) // config errors: one line each
	}
	c, err := baton.NewCluster(cfg)
	if err != nil {
		return nil, usageExit(cmd, err, stderr)
	}
	return c, 0
}

// printJSON writes v as indented JSON.
func printJSON(stdout, stderr io.Writer, cmd string, v any) int {
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		fmt.Fprintf(stderr, "baton %s: %v\n", cmd, err)
		return 1
	}
	return 0
}

// printStatus writes st as tables (cells made inert: see printf); worker
// and replica ids, versions, hashes and queue names are escaped besides
// (redact.Escape: shown as they are when clean), who paused is quoted.
func printStatus(w io.Writer, st *baton.Status) {
	tw := newTable(w, "JOB", "MODE", "SCHEDULE", "NEXT", "PAUSED", "LAST", "LAST OK", "RUNNING", "LOCK")
	for _, j := range st.Jobs {
		sched := j.Schedule
		switch {
		case len(j.After) > 0:
			sched = "after " + strings.Join(j.After, ",")
		case j.At != "":
			sched = "at " + j.At
		case j.Timezone != "" && j.Timezone != "UTC":
			sched += " (" + j.Timezone + ")"
		}
		if j.MaxRuns > 0 {
			sched += fmt.Sprintf(", %d of max_runs %d", j.Runs, j.MaxRuns)
		}
		next := "-"
		switch {
		case j.Done != "":
			next = "done: " + j.Done
		case !j.Next.IsZero():
			next = j.Next.Format(time.RFC3339) + " (in " + j.Next.Sub(st.Time).Round(time.Second).String() + ")"
		}
		paused := "no"
		if j.Paused {
			paused = "yes (" + j.PausedBy + ")"
		}
		last := "-"
		if r := j.Last; r != nil {
			last = r.Tick.Format(time.RFC3339) + " " + string(r.Status)
			if r.Worker != "" {
				last += " on " + redact.Escape(r.Worker)
			}
		}
		running := "-"
		switch {
		case len(j.Running) > 0:
			var parts []string
			for _, r := range j.Running {
				parts = append(parts, fmt.Sprintf("%s on %s", r.Tick.Format(time.RFC3339), redact.Escape(r.Worker)))
			}
			running = strings.Join(parts, ", ")
		case j.Leader != nil:
			// a singleton runs while it leads
			running = "led by " + redact.Escape(j.Leader.ID) + " since " + j.Leader.Since.UTC().Format(time.RFC3339)
		}
		tw.row(j.Name, j.Mode, dash(sched), next, paused, last, lastOK(j, st.Time), running, lockLine(j))
	}
	_ = tw.flush()
	printPauses(w, st)
	printFailing(w, st)
	printSchedules(w, st)
	printLimits(w, st)

	fmt.Fprintln(w)
	if len(st.Replicas) == 0 {
		fmt.Fprintln(w, "REPLICAS: none seen in the last 10m")
	} else {
		tw = newTable(w, "REPLICA", "ROLE", "VERSION", "JOB LIST", "LAST SEEN", "SKEW", "QUEUES")
		for _, r := range st.Replicas {
			seen := st.Time.Sub(r.LastSeen).Round(time.Second).String() + " ago"
			if !r.Live {
				seen += " (gone)"
			}
			hash := redact.Escape(r.ListHash)
			if r.Differs {
				hash += " (differs)"
			}
			qs := make([]string, len(r.Queues))
			for i, q := range r.Queues {
				qs[i] = redact.Escape(q)
			}
			tw.row(redact.Escape(r.ID), redact.Escape(r.Role), redact.Escape(r.Version), hash, seen, r.Skew.String(), dash(strings.Join(qs, ",")))
		}
		_ = tw.flush()
	}
	if len(st.ListDiffs) > 0 {
		fmt.Fprintf(w, "\nlive replicas run different job lists; they differ on %d jobs (definition: mode queue digest):\n", len(st.ListDiffs))
		for _, d := range st.ListDiffs {
			printf(w, "  %s\n", d)
		}
	}
	for _, warn := range st.Warnings {
		printf(w, "\n%s\n", warn)
	}
}

// printLimits lists the limits shared by jobs: their slots held now and
// the runs holding them.
func printLimits(w io.Writer, st *baton.Status) {
	if len(st.Limits) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw := newTable(w, "LIMIT", "HELD", "JOBS", "HOLDERS")
	for _, l := range st.Limits {
		var holders []string
		for _, s := range l.Held {
			h := fmt.Sprintf("slot %d: a run unknown (fence %d)", s.Index, s.Fence)
			if r := s.Holder; r != nil {
				h = fmt.Sprintf("slot %d: %s@%s on %s since %s (fence %d)", s.Index, r.Job, r.Tick.Format(time.RFC3339),
					redact.Escape(r.Replica), r.Started.Format(time.RFC3339), s.Fence)
			}
			holders = append(holders, h)
		}
		tw.row(l.Name, fmt.Sprintf("%d of %d", len(l.Held), l.Size), dash(strings.Join(l.Jobs, ",")), dash(strings.Join(holders, "; ")))
	}
	_ = tw.flush()
}

// printSchedules summarises the runtime schedules (`baton schedules list`
// lists them): how many, which are paused, which the replicas refuse and
// why, which fail (the ids and reasons come from Redis: quoted).
func printSchedules(w io.Writer, st *baton.Status) {
	s := st.Schedules
	if s == nil || s.Count == 0 && s.Refused == 0 && s.WentBack == nil {
		return
	}
	fmt.Fprintf(w, "\nRUNTIME SCHEDULES: %d (baton schedules list), %d paused, %d refused, %d failing\n", s.Count, s.Paused, s.Refused, s.Failing)
	if b := s.WentBack; b != nil {
		printf(w, "  STORE WENT BACK at %s (the queue Redis restarted without persistence, or from an older snapshot): replica %s had read version %d, found %d; put back %d, deleted again %d, kept %d changed since; run the queue Redis with appendonly yes\n",
			b.At.Format(time.RFC3339), redact.Quote(b.Replica), b.Had, b.Now, b.PutBack, b.Deleted, b.Kept)
	}
	if s.Paused > 0 {
		ids := make([]string, len(s.PausedFirst))
		for i, id := range s.PausedFirst {
			ids[i] = redact.Quote(id)
		}
		more := ""
		if n := s.Paused - int64(len(ids)); n > 0 {
			more = fmt.Sprintf(" and %d more", n)
		}
		printf(w, "  paused: %s%s\n", strings.Join(ids, ", "), more)
	}
	for _, p := range s.RefusedFirst {
		printf(w, "  refused: %s: %s\n", redact.Quote(p.ID), redact.Quote(p.Why))
	}
	if n := s.Refused - len(s.RefusedFirst); n > 0 {
		printf(w, "  refused: %d more\n", n)
	}
	for _, p := range s.FailingFirst {
		printf(w, "  failing: %s: %s\n", redact.Quote(p.ID), redact.Quote(p.Why))
	}
	if n := s.Failing - int64(len(s.FailingFirst)); n > 0 {
		printf(w, "  failing: %d more\n", n)
	}
}

// printPauses lists who paused which job with baton pause, since when and
// why; the note is the operator's text, quoted.
func printPauses(w io.Writer, st *baton.Status) {
	for _, j := range st.Jobs {
		if !j.Paused || j.PausedSince.IsZero() {
			continue
		}
		line := fmt.Sprintf("%s paused by %s since %s (%s ago)", j.Name, redact.Quote(j.PausedBy),
			j.PausedSince.Format(time.RFC3339), st.Time.Sub(j.PausedSince).Round(time.Second))
		if !j.PausedUntil.IsZero() {
			line += fmt.Sprintf(" until %s (in %s)", j.PausedUntil.Format(time.RFC3339), j.PausedUntil.Sub(st.Time).Round(time.Second))
		}
		if j.PauseNote != "" {
			line += ": " + redact.Quote(j.PauseNote)
		}
		printf(w, "%s\n", line)
	}
}

// lastOK is a job's LAST OK cell: when its last successful run ended, and
// how long ago.
func lastOK(j baton.JobStatus, now time.Time) string {
	if j.LastSuccess.IsZero() {
		return "-"
	}
	return j.LastSuccess.UTC().Format(time.RFC3339) + " (" + now.Sub(j.LastSuccess).Round(time.Second).String() + " ago)"
}

// printFailing lists the jobs whose latest runs failed: how many in a row,
// since which success, and the newest run's reason and last output line.
func printFailing(w io.Writer, st *baton.Status) {
	for _, j := range st.Jobs {
		if j.FailureStreak == 0 {
			continue
		}
		since := "no success in the history"
		if !j.LastSuccess.IsZero() {
			since = "last success " + lastOK(j, st.Time)
		}
		runs := "runs"
		if j.FailureStreak == 1 {
			runs = "run"
		}
		line := fmt.Sprintf("%s: %d failed %s in a row, %s", j.Name, j.FailureStreak, runs, since)
		if r := j.Last; r != nil && r.Status.Failed() {
			line += "; last: " + why(*r)
		}
		printf(w, "%s\n", line)
	}
}

// lockLine describes a job's lock: a singleton's leader, or the execution
// lease with its fence and remaining ttl.
func lockLine(j baton.JobStatus) string {
	switch {
	case j.Leader != nil:
		return fmt.Sprintf("leader %s since %s, fence %d", redact.Quote(j.Leader.ID), j.Leader.Since.UTC().Format(time.RFC3339), j.Leader.Fence)
	case j.Lock != nil && j.Lock.Masters >= j.Lock.Quorum:
		return fmt.Sprintf("held, fence %d, ttl %s", j.Lock.Fence, j.Lock.TTL.Round(time.Millisecond))
	case j.Lock != nil:
		return fmt.Sprintf("on %d of %d masters (quorum %d)", j.Lock.Masters, j.Lock.Quorum, j.Lock.Quorum)
	}
	return "-"
}

const locksHelp = `usage: baton locks [--config FILE] [--json]

Lists the locks held now on the lock masters: execution leases (exec:JOB),
singleton and leader elections (election:...), and baton lock's locks; for
each, on how many masters its key exists (held: at least a quorum), the
highest fencing counter and the remaining ttl.

Exit status: 0 done; 1 a lock master unreachable (the others are listed);
2 usage error.

flags:
`

// runLocks implements "baton locks".
func runLocks(fs *flagSet, o *configJSON, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		return usageExit("locks", usagef("unexpected argument %q", args[0]), stderr)
	}
	c, code := openCluster(fs, o.path, "locks", stderr)
	if c == nil {
		return code
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	held, err := c.Locks(ctx)
	code = 0
	if err != nil {
		printf(stderr, "baton locks: %s\n", errors.New(c.Config().MaskSecrets(err.Error())))
		code = 1
		if errors.Is(err, locking.ErrUnavailable) {
			return code
		}
	}
	if o.asJSON {
		if held == nil {
			held = []locking.HeldLock{}
		}
		return max(code, printJSON(stdout, stderr, "locks", held))
	}
	if len(held) == 0 {
		fmt.Fprintln(stdout, "no locks held")
		return code
	}
	masters := max(len(c.Config().Locking.Masters), 1) // none: the queue Redis
	tw := newTable(stdout, "LOCK", "MASTERS", "FENCE", "TTL")
	for _, h := range held {
		name := redact.Quote(h.Name)
		if h.Shares > 0 { // a read/write lock's readers, a fair semaphore's holders
			name += fmt.Sprintf(" (%d shares)", h.Shares)
		}
		tw.row(name, fmt.Sprintf("%d of %d (quorum %d)", h.Masters, masters, h.Quorum), strconv.FormatInt(h.Fence, 10), h.TTL.Round(time.Millisecond).String())
	}
	_ = tw.flush()
	return code
}
