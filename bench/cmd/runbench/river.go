package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/robfig/cron/v3"
)

// riverReplicaArg makes this binary a River replica process (see
// riverReplicaMain); the River cell starts three and kills the leader's.
const riverReplicaArg = "__river-replica"

// riverInsertTimeout is how long River's periodic job enqueuer lets one
// insert transaction run (riversharedmaintenance.TimeoutDefault).
const riverInsertTimeout = 30 * time.Second

// tickArgs is the periodic job's arguments: the schedule's id.
type tickArgs struct {
	S string `json:"s"`
}

// Kind is the River job kind of every tick.
func (tickArgs) Kind() string { return "runbench_tick" }

// tickWorker does nothing: the start of the run is what is measured (the
// job row's attempted_at).
type tickWorker struct {
	river.WorkerDefaults[tickArgs]
}

// Work returns at once.
func (tickWorker) Work(context.Context, *river.Job[tickArgs]) error { return nil }

// cronSpec is the 6-field (with seconds) cron spec firing at every
// epoch-aligned multiple of period.
func cronSpec(period time.Duration) (string, error) {
	switch {
	case period < time.Minute && time.Minute%period == 0 && period%time.Second == 0:
		return fmt.Sprintf("*/%d * * * * *", int(period/time.Second)), nil
	case period == time.Minute:
		return "0 * * * * *", nil
	case period%time.Minute == 0 && time.Hour%period == 0:
		return fmt.Sprintf("0 */%d * * * *", int(period/time.Minute)), nil
	}
	return "", fmt.Errorf("period %v: must divide a minute (whole seconds) or an hour (whole minutes)", period)
}

var cronParser = cron.NewParser(cron.Second | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)

// riverReplicaMain runs one River client: it starts, then adds N periodic
// jobs at runtime with PeriodicJobs().Add (one per schedule, all on the same
// cron spec), reports "ready <add ns> <rss KiB>" on stdout and runs until
// SIGTERM (graceful stop) or SIGKILL (the leader kill).
func riverReplicaMain(args []string) int {
	fs := flag.NewFlagSet(riverReplicaArg, flag.ContinueOnError)
	dsn := fs.String("dsn", "", "PostgreSQL connection string")
	id := fs.String("id", "", "River client id")
	n := fs.Int("n", 0, "periodic jobs to add")
	period := fs.Duration("period", time.Minute, "schedule period")
	workers := fs.Int("workers", 100, "MaxWorkers of the default queue")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "river replica %s: %v\n", *id, err)
		return 1
	}
	spec, err := cronSpec(*period)
	if err != nil {
		return fail(err)
	}
	sched, err := cronParser.Parse(spec)
	if err != nil {
		return fail(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	pcfg, err := pgxpool.ParseConfig(*dsn)
	if err != nil {
		return fail(err)
	}
	pcfg.MaxConns = 20
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return fail(err)
	}
	defer pool.Close()
	ws := river.NewWorkers()
	river.AddWorker(ws, &tickWorker{})
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		ID:      *id,
		Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: *workers}},
		Workers: ws,
		Logger:  slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})),
	})
	if err != nil {
		return fail(err)
	}
	if err := client.Start(ctx); err != nil {
		return fail(err)
	}
	began := time.Now()
	for i := range *n {
		sid := schedID(i)
		client.PeriodicJobs().Add(river.NewPeriodicJob(sched, func() (river.JobArgs, *river.InsertOpts) {
			return tickArgs{S: sid}, nil
		}, &river.PeriodicJobOpts{ID: sid}))
		if (i+1)%(max(*n/4, 1)) == 0 && *n >= 10000 {
			fmt.Fprintf(os.Stderr, "%s   river %s: added %d/%d periodic jobs\n", time.Now().Format("15:04:05.000"), *id, i+1, *n)
		}
	}
	fmt.Printf("ready %d %d\n", time.Since(began).Nanoseconds(), rssKiB(os.Getpid()))
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = client.StopAndCancel(sctx)
	return 0
}

// riverReplica is one replica process.
type riverReplica struct {
	id     string
	cmd    *exec.Cmd
	ready  chan string
	exited chan struct{}
	killed bool
	errs   *insertErrors
}

// insertErrors collects the enqueuer's failed insert transactions from the
// replicas' logs: River logs them and drops the instant's jobs.
type insertErrors struct {
	mu    sync.Mutex
	fails []insertFail
	first string
	// logged counts every ERROR line of the replicas by message.
	logged map[string]int
}

type insertFail struct {
	at   time.Time
	jobs int
}

var (
	insertErrRE = regexp.MustCompile(`time=(\S+) level=ERROR msg="maintenance\.PeriodicJobEnqueuer: Error inserting periodic jobs".*num_jobs=(\d+)`)
	errorLineRE = regexp.MustCompile(`level=ERROR msg="([^"]+)"`)
)

// scan forwards a replica's log lines to stderr and records failed inserts.
func (e *insertErrors) scan(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		l := sc.Text()
		fmt.Fprintln(os.Stderr, l)
		if m := errorLineRE.FindStringSubmatch(l); m != nil {
			e.mu.Lock()
			if e.logged == nil {
				e.logged = map[string]int{}
			}
			e.logged[m[1]]++
			e.mu.Unlock()
		}
		if m := insertErrRE.FindStringSubmatch(l); m != nil {
			at, _ := time.Parse(time.RFC3339Nano, m[1])
			n, _ := strconv.Atoi(m[2])
			e.mu.Lock()
			e.fails = append(e.fails, insertFail{at, n})
			if e.first == "" {
				e.first = l
			}
			e.mu.Unlock()
		}
	}
}

func startRiverReplica(ctx context.Context, cfg cellConfig, dsn, id string, errs *insertErrors) (*riverReplica, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	r := &riverReplica{id: id, ready: make(chan string, 1), exited: make(chan struct{}), errs: errs}
	r.cmd = exec.Command(exe, riverReplicaArg, "-dsn", dsn, "-id", id, "-n", strconv.Itoa(cfg.schedules),
		"-period", cfg.period.String(), "-workers", strconv.Itoa(cfg.workers))
	stderr, err := r.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := r.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := r.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if l := sc.Text(); strings.HasPrefix(l, "ready ") {
				r.ready <- l
			}
		}
	}()
	scanned := make(chan struct{})
	go func() { errs.scan(stderr); close(scanned) }()
	go func() { <-scanned; _ = r.cmd.Wait(); close(r.exited) }()
	return r, nil
}

// stop ends the replica gracefully (SIGTERM), or with SIGKILL after 20s.
func (r *riverReplica) stop() {
	select {
	case <-r.exited:
		return
	default:
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.exited:
	case <-time.After(20 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.exited
	}
}

// runRiver is the River cell: PostgreSQL, migrations, 3 replica processes
// each adding the N periodic jobs, cfg.instants measured instants, then the
// leader killed cfg.killLead before the next instant, and one instant after.
func runRiver(ctx context.Context, cfg cellConfig) (cellResult, string, error) {
	res := cellResult{system: "River PeriodicJobs", schedules: cfg.schedules, replicas: cfg.replicas}
	spec, err := cronSpec(cfg.period)
	if err != nil {
		return res, "", err
	}
	res.runsWith = fmt.Sprintf("river v0.51.2 + riverpgxv5 on PostgreSQL; %d client processes, each `PeriodicJobs().Add` × N after Start, cron `%s` (robfig/cron, seconds field), MaxWorkers %d each",
		cfg.replicas, spec, cfg.workers)
	logf("River: starting PostgreSQL")
	pg, err := startPostgres(ctx)
	if err != nil {
		return res, "", err
	}
	defer pg.stop()
	pgNote := pg.version
	if pg.runAs != "" {
		pgNote += " (run as " + pg.runAs + ")"
	}
	logf("River: %s on 127.0.0.1:%d, data in %s", pgNote, pg.port, pg.dir)
	pool, err := pgxpool.New(ctx, pg.dsn())
	if err != nil {
		return res, pgNote, err
	}
	defer pool.Close()
	mctx, mcancel := context.WithTimeout(ctx, 2*time.Minute)
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err == nil {
		_, err = migrator.Migrate(mctx, rivermigrate.DirectionUp, nil)
	}
	mcancel()
	if err != nil {
		return res, pgNote, fmt.Errorf("river migrations: %w", err)
	}
	q := func(sql string, args ...any) (int64, error) {
		qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		var v int64
		err := pool.QueryRow(qctx, sql, args...).Scan(&v)
		return v, err
	}
	dbBefore, err := q("SELECT pg_database_size(current_database())")
	if err != nil {
		return res, pgNote, err
	}

	logf("River: %d replicas each adding %d periodic jobs (cron %q)", cfg.replicas, cfg.schedules, spec)
	var reps []*riverReplica
	errs := &insertErrors{}
	defer func() {
		for _, r := range reps {
			r.stop()
		}
	}()
	for i := range cfg.replicas {
		r, err := startRiverReplica(ctx, cfg, pg.dsn(), fmt.Sprintf("replica-%d", i+1), errs)
		if err != nil {
			return res, pgNote, err
		}
		reps = append(reps, r)
	}
	readyBy := time.Now().Add(2*time.Minute + time.Duration(cfg.schedules)*time.Millisecond)
	var rss []string
	for _, r := range reps {
		select {
		case l := <-r.ready:
			var ns, kib int64
			_, _ = fmt.Sscanf(l, "ready %d %d", &ns, &kib)
			res.addTook = max(res.addTook, time.Duration(ns))
			rss = append(rss, fmt.Sprintf("%.0f", float64(kib)/1024))
		case <-r.exited:
			return res, pgNote, fmt.Errorf("%s exited before adding its periodic jobs", r.id)
		case <-time.After(time.Until(readyBy)):
			return res, pgNote, fmt.Errorf("%s not ready by %s", r.id, readyBy.Format("15:04:05"))
		case <-ctx.Done():
			return res, pgNote, ctx.Err()
		}
	}
	leader := func() string {
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		var id string
		_ = pool.QueryRow(qctx, "SELECT leader_id FROM river_leader WHERE expires_at > now() LIMIT 1").Scan(&id)
		return id
	}
	deadline := time.Now().Add(60 * time.Second)
	for leader() == "" {
		if time.Now().After(deadline) {
			return res, pgNote, errors.New("no River leader elected within 60s")
		}
		time.Sleep(250 * time.Millisecond)
	}
	logf("River: all replicas ready (adding took up to %v), leader %s", res.addTook.Round(time.Millisecond), leader())
	dbAfter, err := q("SELECT pg_database_size(current_database())")
	if err != nil {
		return res, pgNote, err
	}

	first := nextInstant(time.Now().Add(cfg.settle), cfg.period)
	var instants []time.Time
	var labels []string
	for k := range cfg.instants {
		instants = append(instants, first.Add(time.Duration(k)*cfg.period))
		labels = append(labels, "")
	}
	var killAt time.Time
	if cfg.kill {
		k := instants[len(instants)-1].Add(cfg.period)
		instants = append(instants, k, k.Add(cfg.period))
		labels = append(labels, fmt.Sprintf("leader killed %v before", cfg.killLead), "next instant after the kill")
		killAt = k.Add(-cfg.killLead)
	}
	last := instants[len(instants)-1]
	logf("River: measuring instants %s .. %s", first.Format("15:04:05"), last.Format("15:04:05"))
	var killed, newLeader string
	var newLeaderAt time.Time
	if cfg.kill {
		if err := sleepUntil(ctx, killAt); err != nil {
			return res, pgNote, err
		}
		killed = leader()
		for _, r := range reps {
			if r.id == killed {
				_ = r.cmd.Process.Signal(syscall.SIGKILL)
				r.killed = true
				<-r.exited
			}
		}
		if killed == "" {
			return res, pgNote, errors.New("no River leader to kill")
		}
		logf("River: killed leader %s (SIGKILL) at %s", killed, time.Now().Format("15:04:05.000"))
		deadline := last.Add(cfg.period)
		for time.Now().Before(deadline) {
			if l := leader(); l != "" && l != killed {
				newLeader, newLeaderAt = l, time.Now()
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
		if newLeader != "" {
			logf("River: new leader %s at %s", newLeader, newLeaderAt.Format("15:04:05.000"))
		} else {
			logf("River: no new leader by %s", deadline.Format("15:04:05"))
		}
	}
	if err := sleepUntil(ctx, last.Add(2*time.Second)); err != nil {
		return res, pgNote, err
	}
	var rssEnd []string
	for _, r := range reps {
		if !r.killed {
			rssEnd = append(rssEnd, fmt.Sprintf("%s %.0f", r.id, float64(rssKiB(r.cmd.Process.Pid))/1024))
		}
	}

	// drain: every job of the measured instants started, the count stable,
	// and no sooner than riverInsertTimeout after the last instant: the
	// enqueuer inserts an instant's N jobs in one transaction, which may take
	// seconds, and gives up after 30s
	logf("River: waiting for the workers to start every job (up to %v)", cfg.drain)
	drainEnd := time.Now().Add(cfg.drain)
	minEnd := last.Add(riverInsertTimeout + 5*time.Second)
	var prevTotal int64 = -1
	stable := 0
	for time.Now().Before(drainEnd) {
		total, err1 := q("SELECT count(*) FROM river_job WHERE kind = 'runbench_tick' AND scheduled_at >= $1 AND scheduled_at <= $2", first, last)
		waiting, err2 := q("SELECT count(*) FROM river_job WHERE kind = 'runbench_tick' AND scheduled_at >= $1 AND scheduled_at <= $2 AND attempted_at IS NULL", first, last)
		if err := errors.Join(err1, err2); err != nil {
			return res, pgNote, err
		}
		if waiting == 0 && total == prevTotal {
			stable++
		} else {
			stable = 0
		}
		if stable >= 3 && time.Now().After(minEnd) {
			break
		}
		prevTotal = total
		time.Sleep(time.Second)
	}

	qctx, qcancel := context.WithTimeout(ctx, 2*time.Minute)
	defer qcancel()
	rows, err := pool.Query(qctx, `SELECT args->>'s', scheduled_at, count(*), count(attempted_at), min(created_at), min(attempted_at)
		FROM river_job WHERE kind = 'runbench_tick' AND scheduled_at >= $1 AND scheduled_at <= $2 GROUP BY 1, 2`, first, last)
	if err != nil {
		return res, pgNote, err
	}
	obs := map[tickKey]*tickObs{}
	for rows.Next() {
		var s string
		var at, created time.Time
		var attempted *time.Time
		var n, started int
		if err := rows.Scan(&s, &at, &n, &started, &created, &attempted); err != nil {
			rows.Close()
			return res, pgNote, err
		}
		o := &tickObs{dispatched: n, runs: started, firstDispatch: created}
		if attempted != nil {
			o.firstStart = *attempted
		}
		obs[tickKey{s, at.Unix()}] = o
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return res, pgNote, err
	}
	for i, at := range instants {
		res.instants = append(res.instants, tally(at, labels[i], cfg.schedules, obs))
	}
	errs.mu.Lock()
	for _, f := range errs.fails {
		// a failed insert belongs to the latest instant at or before it
		for i := len(instants) - 1; i >= 0; i-- {
			if !f.at.Before(instants[i]) {
				res.instants[i].dispatchErrors += f.jobs
				break
			}
		}
	}
	if len(errs.fails) > 0 {
		res.notes = append(res.notes, fmt.Sprintf("**%d enqueuer insert transactions failed** (every job of the batch dropped; counted as dispatch errors under the instant before the failure), first: `%s`",
			len(errs.fails), errs.first))
	}
	if len(errs.logged) > 0 {
		var ls []string
		for msg, n := range errs.logged {
			ls = append(ls, fmt.Sprintf("%q × %d", msg, n))
		}
		slices.Sort(ls)
		res.notes = append(res.notes, "errors the replicas logged: "+strings.Join(ls, ", "))
	}
	errs.mu.Unlock()
	jobRows, err1 := q("SELECT count(*) FROM river_job")
	jobBytes, err2 := q("SELECT pg_total_relation_size('river_job')")
	if err := errors.Join(err1, err2); err != nil {
		return res, pgNote, err
	}
	res.memory = append(res.memory,
		fmt.Sprintf("PostgreSQL per schedule: none stored, River keeps periodic jobs in each client's memory (durable periodic jobs are River Pro); the database grew %d B while the replicas started and added them (%.1f B per schedule: client, queue and leader rows)",
			dbAfter-dbBefore, float64(dbAfter-dbBefore)/float64(cfg.schedules)),
		fmt.Sprintf("PostgreSQL per tick: %.0f B (river_job with indexes and TOAST, %d rows, %d B)", float64(jobBytes)/float64(max(jobRows, 1)), jobRows, jobBytes),
		fmt.Sprintf("replica RSS after adding N: %s MiB; at the end (survivors): %s MiB", strings.Join(rss, ", "), strings.Join(rssEnd, ", ")))
	if cfg.kill {
		k := res.instants[cfg.instants]
		after := res.instants[cfg.instants+1]
		gap := "none within the run"
		if newLeader != "" {
			gap = fmt.Sprintf("%s elected %.1fs after the kill (%+.1fs from the due instant)", newLeader,
				newLeaderAt.Sub(killAt).Seconds(), newLeaderAt.Sub(k.at).Seconds())
		}
		res.kill = fmt.Sprintf("leader %s SIGKILLed %v before the instant %s; new leader: %s. Ticks of that instant lost: %d of %d; of the next instant: %d of %d",
			killed, cfg.killLead, k.at.Format("15:04:05"), gap, k.missed, k.due, after.missed, after.due)
	}
	res.notes = append(res.notes,
		"River's leader elector: re-elect every 5s (+ up to 1s jitter), leader TTL 15s; a leader that dies without resigning is replaced once its row expires",
		"a new leader computes each periodic job's next run from its own start (no state survives the old leader), so an instant due while no leader runs is skipped")
	return res, pgNote, nil
}
