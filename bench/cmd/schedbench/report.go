package main

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/batonhq/baton/bench/internal/machine"
	"github.com/batonhq/baton/bench/internal/mdtable"
	"github.com/batonhq/baton/bench/internal/stats"
)

type report struct {
	cfg    config
	baton  []batonResult
	gocron []tickResult
	asynq  []tickResult
}

func msf(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/float64(time.Millisecond)) }

// lagPair formats "p50 / p99" in ms, "n/a" without samples.
func lagPair(s []time.Duration) string {
	if len(s) == 0 {
		return "n/a"
	}
	c := slices.Clone(s)
	return msf(stats.Percentile(c, 50)) + " / " + msf(stats.Percentile(c, 99))
}

func median(s []time.Duration) time.Duration {
	if len(s) == 0 {
		return 0
	}
	return stats.Percentile(slices.Clone(s), 50)
}

func p99(s []time.Duration) (time.Duration, bool) {
	if len(s) == 0 {
		return 0, false
	}
	return stats.Percentile(slices.Clone(s), 99), true
}

func per(n int64, jobTicks int) string { return fmt.Sprintf("%.2f", float64(n)/float64(jobTicks)) }

func yn(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func wk(b batonResult) string {
	if b.worker {
		return ""
	}
	return ", no worker"
}

func pctf(v float64) string { return fmt.Sprintf("%.0f%%", v) }

func yes(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}

func (r *report) render(machine []string) string {
	var w strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&w, format, args...) }
	p("# Scheduler: baton vs gocron v2 + redsync vs asynq Scheduler\n\n")
	for _, m := range machine {
		p("- %s\n", m)
	}
	p("\nEvery job is `@every 1s`; baton's ticks are aligned to the Unix epoch, so all J jobs are due at the same instant every second. "+
		"Each cell starts fresh (FLUSHALL), starts its replicas, skips a warm-up, then measures %d ticks (J × %d job-ticks). A job-tick is one (job, due second). "+
		"baton's warm-up is %v: in the first second after a start the replicas do not yet see each other (membership heartbeat every 2s), "+
		"so they all claim the first tick; the losers get BUSY and check those ticks again when the 5s tick lease ends, which would land in the window. "+
		"The peers skip one tick.\n\n", r.cfg.ticks, r.cfg.ticks, r.cfg.warm)

	p("## Targets\n\n")
	tt := mdtable.Table{Header: []string{"target", "measured", "met"}, Align: []byte("llc")}
	for _, b := range r.baton {
		d99, ok := p99(b.dispatchLag)
		switch b.jobs {
		case 1000:
			tt.Add(fmt.Sprintf("1,000 jobs due at once: dispatch p99 ≤ 100 ms (R=%d%s)", b.replicas, wk(b)), msf(d99)+" ms", yes(ok && d99 <= 100*time.Millisecond && b.missedDispatch == 0))
		case 10000:
			tt.Add(fmt.Sprintf("10,000 jobs due at once: dispatch p99 ≤ 1 s (R=%d%s)", b.replicas, wk(b)), msf(d99)+" ms", yes(ok && d99 <= time.Second && b.missedDispatch == 0))
		}
	}
	for _, b := range r.baton {
		if b.jobs == 100 && b.worker {
			s99, ok := p99(b.startLag)
			tt.Add(fmt.Sprintf("100 jobs: start lag p99 ≤ 250 ms (R=%d)", b.replicas), msf(s99)+" ms", yes(ok && s99 <= 250*time.Millisecond))
		}
	}
	var worstPipes, worstCmdsOver float64 = 0, -1e9
	pipesWhere, cmdsWhere := "", ""
	dups, redisp, undisp, notRun := 0, 0, 0, 0
	for _, b := range r.baton {
		pp := float64(b.win.ctrs[0].claimPipes) / float64(b.ticks*b.replicas)
		if pp > worstPipes {
			worstPipes, pipesWhere = pp, fmt.Sprintf("J=%d R=%d%s", b.jobs, b.replicas, wk(b))
		}
		c := float64(b.win.ctrs[0].cmds+b.win.ctrs[1].cmds)/float64(b.jobs*b.ticks) - float64(b.replicas+3)
		if c > worstCmdsOver {
			worstCmdsOver, cmdsWhere = c, fmt.Sprintf("J=%d R=%d%s: %.2f vs %d", b.jobs, b.replicas, wk(b), c+float64(b.replicas+3), b.replicas+3)
		}
		dups += b.duplicates
		redisp += b.redispatched
		undisp += b.missedDispatch
		notRun += b.notRun
	}
	if len(r.baton) > 0 {
		tt.Add("claims: 1 round trip per replica per master per instant", fmt.Sprintf("worst %.2f claim pipelines per replica per instant (%s)", worstPipes, pipesWhere), yes(worstPipes <= 1.0001))
		tt.Add("≤ R + 3 Redis commands per job-tick (baton's clients)", "worst "+cmdsWhere, yes(worstCmdsOver <= 0))
		tt.Add("zero duplicates: no measured tick run twice by the worker (all baton cells with the worker)", fmt.Sprintf("%d run twice (%d more dispatched twice, absorbed by asynq's task-ID dedupe)", dups, redisp), yes(dups == 0))
		tt.Add("zero missed (all baton cells): every measured tick dispatched by window end + 10 s, and run", fmt.Sprintf("%d not dispatched, %d not run", undisp, notRun), yes(undisp == 0 && notRun == 0))
	}
	p("%s\n", tt.String())

	if len(r.baton) > 0 {
		p("## 1. baton: claim → asynq → no-op worker\n\n")
		p("dispatch lag = tick due → the wrapped `handoff.Sender.Dispatch` returned nil (task in asynq), first replica to do so; " +
			"start lag = tick due → the worker's handler started (task ID = tick ID). " +
			"undisp = measured ticks not dispatched when the schedulers were stopped (10 s after the window at the latest); dup = measured ticks the worker ran more than once; " +
			"re-disp = ticks whose Dispatch returned nil on more than one call (asynq's task-ID dedupe absorbs them); " +
			"not run = dispatched but not run by the worker when the drain ended.\n\n")
		ta := mdtable.Table{Header: []string{"jobs", "R", "worker", "dispatch lag p50 / p99 ms", "start lag p50 / p99 ms", "undisp", "dup", "re-disp", "not run", "busy", "sched missed", "dispatch errs"},
			Align: []byte("rrlrrrrrrrrr")}
		for _, b := range r.baton {
			ta.Add(fmt.Sprint(b.jobs), fmt.Sprint(b.replicas), yn(b.worker), lagPair(b.dispatchLag), lagPair(b.startLag),
				fmt.Sprint(b.missedDispatch), fmt.Sprint(b.duplicates), fmt.Sprint(b.redispatched), fmt.Sprint(b.notRun),
				fmt.Sprint(b.stats.Busy), fmt.Sprint(b.stats.Missed), fmt.Sprint(b.stats.DispatchErrors))
		}
		p("%s\n", ta.String())
		p("busy, sched missed, dispatch errs: `Scheduler.Stats()` summed over replicas over the whole cell (warm-up included): " +
			"claims answered BUSY (lease held by another replica: the claim is retried later), ticks judged past their starting deadline, failed Dispatch calls.\n\n")

		p("### Where the time goes (per measured instant, median over the %d instants)\n\n", r.cfg.ticks)
		p("claim = due → the last preferred-claimer claim pipeline answered (all replicas); follower = due → the last follower claim pipeline answered (R > 1; followers check with a plain GET 500 ms + 100 ms per thousand ticks after the instant and only claim a tick they find neither done nor leased, so — means none did); " +
			"Dispatch call = duration of one `Dispatch` call (JSON, config lookup, asynq enqueue, waiting for a pooled connection), p50 / p99 over the measured ticks; " +
			"last commit = due → the last commit pipeline answered; commit pipes = commit pipelines per instant (all replicas). Pipelines are attributed to the second they were sent in.\n\n")
		tw := mdtable.Table{Header: []string{"jobs", "R", "worker", "claim ms", "follower ms", "Dispatch call p50 / p99 ms", "dispatch lag p99 ms", "last commit ms", "commit pipes"},
			Align: []byte("rrlrrrrrr")}
		for _, b := range r.baton {
			d99, _ := p99(b.dispatchLag)
			fol := "—"
			if len(b.followerAt) > 0 {
				fol = msf(median(b.followerAt))
			}
			tw.Add(fmt.Sprint(b.jobs), fmt.Sprint(b.replicas), yn(b.worker), msf(median(b.claimAt)), fol, lagPair(b.dispatchCall), msf(d99),
				msf(median(b.commitAt)), fmt.Sprintf("%.1f", float64(b.commitPipes)/float64(b.ticks)))
		}
		p("%s\n", tw.String())

		p("### Cost per job-tick over the measured window\n\n")
		p("sched = commands sent by the scheduler's go-redis clients (claim/commit pipelines, membership, clock checks, lock client); "+
			"enq = commands sent by the dispatcher's asynq clients (enqueue). Both counted client-side by a go-redis hook, top-level commands only "+
			"(an EVALSHA counts once, whatever the script calls). claim pipes = pipelines holding claim EVALSHAs, per replica per instant. "+
			"worker = top-level commands of the asynq worker process (its own hook). "+
			"server = `INFO commandstats` delta of every call on the redis-server (all clients, worker included, and also the commands run inside Lua scripts; our INFO calls excluded); "+
			"server evals = its EVAL+EVALSHA calls. CPU = CPU time / wall time of the window, %% of one core: "+
			"bench = this process (all scheduler replicas, their clients, the dispatch wrappers and the bookkeeping), "+
			"redis = the redis-server process, worker = the asynq worker process (run at nice %d).\n\n", r.cfg.workerNice)
		tb := mdtable.Table{Header: []string{"jobs", "R", "worker", "sched + enq cmds", "≤ R+3", "claim pipes /replica/instant", "round trips", "worker cmds", "server calls", "server evals", "CPU bench", "CPU redis", "CPU worker"},
			Align: []byte("rrlrlrrrrrrrr")}
		for _, b := range r.baton {
			jt := b.jobs * b.ticks
			s, q := b.win.ctrs[0], b.win.ctrs[1]
			tb.Add(fmt.Sprint(b.jobs), fmt.Sprint(b.replicas), yn(b.worker),
				fmt.Sprintf("%s + %s = %s", per(s.cmds, jt), per(q.cmds, jt), per(s.cmds+q.cmds, jt)),
				yes(float64(s.cmds+q.cmds)/float64(jt) <= float64(b.replicas+3)),
				fmt.Sprintf("%.2f", float64(s.claimPipes)/float64(b.ticks*b.replicas)),
				per(s.trips+q.trips, jt), per(b.win.workerCmds, jt), per(b.win.serverCalls, jt), per(b.win.serverEvals, jt),
				pctf(b.win.selfPct), pctf(b.win.redisPct), pctf(b.win.workPct))
		}
		p("%s\n", tb.String())

		p("### The scheduler's warnings and errors, counted (whole cell)\n\n")
		found := false
		for _, b := range r.baton {
			for _, l := range b.logs {
				p("- J=%d R=%d%s: %s\n", b.jobs, b.replicas, wk(b), l)
				found = true
			}
		}
		if !found {
			p("None.\n")
		}
		p("\n")
	}

	if len(r.gocron)+len(r.asynq) > 0 {
		p("## 2. Peers on the same job set\n\n")
		p("gocron v2: 3 `gocron.Scheduler`s in this process, each with every job as `DurationJob(1s)` started with `WithStartAt(WithStartDateTime(<a whole second>))` " +
			"(gocron's own alignment is \"start + n × duration\"; its docs suggest rounding the start time) and `WithDistributedLocker` backed by redsync " +
			"(one go-redis client and redsync per scheduler, mutex name = job name, held while the job function runs, released at once after it). " +
			"The job function records (job, start time truncated to the second). " +
			"asynq Scheduler: 3 `asynq.Scheduler`s each registering `@every 1s` for every task; robfig/cron's `@every` rounds to whole seconds, so all replicas fire in the same second; " +
			"every replica enqueues its own copy (random task ID); the tick of a task is its enqueue second; the same worker process as for baton runs them.\n\n")
		p("runs/job-tick = handler or job-function starts per measured job-tick (1 is exactly once); dup = job-ticks run more than once; missed = job-ticks never run; " +
			"start lag = due second → first start; cmds = top-level commands of the library's clients (hook) per job-tick; server = commandstats calls per job-tick (incl. Lua-internal and worker); " +
			"CPU bench = this process, which runs gocron's job functions (gocron has no worker).\n\n")
		tp := mdtable.Table{Header: []string{"scheduler", "jobs", "R", "runs/job-tick", "dup", "missed", "start lag p50 / p99 ms", "cmds", "server calls", "lock errors", "CPU bench", "CPU redis", "CPU worker"},
			Align: []byte("lrrrrrrrrrrrr")}
		for _, g := range append(slices.Clone(r.gocron), r.asynq...) {
			jt := g.jobs * g.ticks
			runs := fmt.Sprintf("%.2f", float64(g.runs)/float64(jt))
			lockErrs, worker := fmt.Sprint(g.lockErrors), "—"
			if g.enqueues > 0 {
				runs += fmt.Sprintf(" (enq %.2f)", float64(g.enqueues)/float64(jt))
				lockErrs = "—"
				worker = pctf(g.win.workPct)
			}
			tp.Add(g.name, fmt.Sprint(g.jobs), fmt.Sprint(g.replicas), runs, fmt.Sprint(g.duplicates), fmt.Sprint(g.missed),
				lagPair(g.startLag), per(g.win.ctrs[0].cmds, jt), per(g.win.serverCalls, jt), lockErrs,
				pctf(g.win.selfPct), pctf(g.win.redisPct), worker)
		}
		p("%s\n", tp.String())
		p("lock errors: gocron lock attempts that failed over the whole cell, including attempts cut short by the shutdown (the run is skipped on that scheduler). " +
			"redsync defaults: 32 tries, retry delay uniform in [50ms, 250ms), expiry 8s; WithTries(1): one attempt. " +
			"A run more than 1 s late is counted in the following second (a duplicate there and a miss in its own).\n\n")
	}

	p("## Settings\n\n")
	p("- baton: `scheduler.New` per replica with its own go-redis clients (one for the lock master, one for the asynq client), `WithReplica(rN)`, " +
		"defaults otherwise (follower delay 500ms + 100ms per thousand ticks due, dispatch parallelism 16, tick lease 5s, master timeout 2s); one lock master = the queue Redis. " +
		"Jobs come from `config.Load` of a generated YAML (`handler` jobs, mode cron, queue default, starting deadline 1m, catch-up latest). " +
		"Dispatch: `handoff.New(cfg, asynq.NewClientFromRedisClient(rdb), nil, handoff.WithQueueRedis(rdb))` wrapped to time the return.\n")
	p("- go-redis clients: defaults (PoolSize 10 × GOMAXPROCS) plus ContextTimeoutEnabled.\n")
	p("- worker: one `asynq.Server` in a separate process (this binary re-executed, under `nice -n %d`), Concurrency %d, TaskCheckInterval %v, queue baton:default; "+
		"the handler only records its start time (written to a pipe, read by this process).\n", r.cfg.workerNice, r.cfg.workerConc, r.cfg.checkEvery)
	p("- windows: counters, CPU and commandstats are read 200 ms before the first measured tick and 200 ms before the tick after the last one; " +
		"so the window holds the work of exactly the measured instants when each instant's work ends within ~800 ms (the follower checks come 500 ms after the instant, 1.5 s at 10,000 jobs; those of the instant before the first measured one fall inside the window in their place). " +
		"After the window the schedulers run until every measured tick is dispatched (at most 10 s more), then stop; the worker then drains (at most -drain).\n")
	p("- Everything shares 2 cores with the redis-server and the worker: lags include CPU contention.\n")
	return w.String()
}

// describeMachine lists what the numbers depend on.
func describeMachine(cfg config, began time.Time) []string {
	return machine.Describe(began, "persistence off, loopback, one process started by the benchmark; queue and lock master on it",
		[]string{"github.com/batonhq/baton", "github.com/go-co-op/gocron/v2", "github.com/go-redsync/redsync/v4", "github.com/hibiken/asynq", "github.com/redis/go-redis/v9"}, "cd bench && go run ./cmd/schedbench", cfg.args)
}
