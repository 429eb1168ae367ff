package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/batonhq/baton/bench/internal/machine"
	"github.com/batonhq/baton/bench/internal/mdtable"
	"github.com/batonhq/baton/bench/internal/stats"
)

// results collects per-repetition values and run totals, keyed by cell,
// library and metric.
type results struct {
	vals   map[string][]float64
	totals map[string]int64
}

func newResults() *results {
	return &results{vals: map[string][]float64{}, totals: map[string]int64{}}
}

func key(cell, lib, metric string) string { return cell + "|" + lib + "|" + metric }

func (r *results) add(cell, lib, metric string, v float64) {
	k := key(cell, lib, metric)
	r.vals[k] = append(r.vals[k], v)
}

func (r *results) total(cell, lib, metric string, n int64) { r.totals[key(cell, lib, metric)] += n }

func (r *results) get(cell, lib, metric string) stats.Summary {
	return stats.Summarize(r.vals[key(cell, lib, metric)])
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// addContended records one contended repetition; metrics without samples are
// NaN and left out of the summary.
func (r *results) addContended(cell, lib string, c contendResult, window time.Duration) {
	nan := math.NaN()
	r.add(cell, lib, "acq", float64(c.acquired)/window.Seconds())
	h50, h99, reacq := nan, nan, nan
	if len(c.handoffs) > 0 {
		h50, h99 = ms(stats.Percentile(c.handoffs, 50)), ms(stats.Percentile(c.handoffs, 99))
	}
	if n := c.reacquired + int64(len(c.handoffs)); n > 0 {
		reacq = float64(c.reacquired) / float64(n)
	}
	r.add(cell, lib, "h50", h50)
	r.add(cell, lib, "h99", h99)
	r.add(cell, lib, "reacq", reacq)
	w99, wmax, cpa := nan, nan, nan
	if len(c.waits) > 0 {
		w99, wmax = ms(stats.Percentile(c.waits, 99)), ms(stats.Max(c.waits))
	}
	if c.acquired > 0 {
		cpa = float64(c.commands) / float64(c.acquired)
	}
	r.add(cell, lib, "w99", w99)
	r.add(cell, lib, "wmax", wmax)
	r.add(cell, lib, "cmds", cpa)
	r.total(cell, lib, "failed", c.failed)
	r.total(cell, lib, "attempts", c.failed+int64(len(c.waits)))
	r.total(cell, lib, "overlaps", c.overlaps)
	r.total(cell, lib, "unlockErrs", c.unlockErrs)
}

// f formats a summary as "median (min–max)" with the given verb, "n/a" when
// no repetition produced a value.
func f(s stats.Summary, verb string) string {
	if s.N == 0 {
		return "n/a"
	}
	m := fmt.Sprintf(verb, s.Median)
	if s.N == 1 {
		return m
	}
	return fmt.Sprintf("%s (%s–%s)", m, fmt.Sprintf(verb, s.Min), fmt.Sprintf(verb, s.Max))
}

func pct(s stats.Summary) string {
	s.Median, s.Min, s.Max = 100*s.Median, 100*s.Min, 100*s.Max
	return f(s, "%.0f%%")
}

// report renders the whole markdown document.
func (b *bench) report(machine []string) string {
	var w strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&w, format, args...) }
	r := b.res
	p("# Lock libraries on Redis: baton vs redsync vs bsm/redislock\n\n")
	for _, m := range machine {
		p("- %s\n", m)
	}
	p("\nEvery cell: median (min–max) over %d repetitions of %v each; the order of the libraries rotates every repetition. "+
		"All libraries use one go-redis v9 client per master with PoolSize %d and a lock ttl of %v (redsync's default expiry).\n\n",
		b.cfg.reps, b.cfg.duration, poolSize, lockTTL)

	p("## A. Uncontended lock+unlock pairs/s, 1 master\n\n")
	p("Each goroutine locks and unlocks its own key. floor = SET NX PX + EVALSHA compare-and-delete (2 round trips); " +
		"× floor is the ratio to the floor measured in the same repetition; " +
		"Redis µs/pair is the redis-server process's CPU time (user + system, /proc) over the pairs, " +
		"calls/pair what INFO commandstats counted (a script's EVALSHA and each command it runs), " +
		"client µs/pair this process's CPU time over the pairs (the library, go-redis and the benchmark's loop).\n\n")
	ta := mdtable.Table{Header: []string{"library", "goroutines", "pairs/s", "× floor", "Redis µs/pair", "calls/pair", "client µs/pair"}, Align: []byte("lrrrrrr")}
	for _, conc := range uncontendedConc {
		cell := fmt.Sprintf("A/%d", conc)
		for _, c := range b.cellA {
			ta.Add(c.name, fmt.Sprint(conc), f(r.get(cell, c.name, "rate"), "%.0f"), f(r.get(cell, c.name, "ratio"), "%.2f"),
				f(r.get(cell, c.name, "cpu"), "%.1f"), f(r.get(cell, c.name, "calls"), "%.1f"), f(r.get(cell, c.name, "client"), "%.1f"))
		}
	}
	p("%s\n", ta.String())

	p("## B. Uncontended pairs/s on a quorum of masters, %d goroutines\n\n", quorumConc)
	p("baton TryLock + Release against a redsync Mutex (WithTries(1)) over the same number of independent masters; Redis µs/pair is summed over the masters.\n\n")
	tb := mdtable.Table{Header: []string{"masters", "baton pairs/s", "redsync pairs/s", "baton / redsync", "baton Redis µs/pair", "redsync Redis µs/pair"}, Align: []byte("rrrrrr")}
	for _, n := range quorumSizes {
		cell := fmt.Sprintf("B/%d", n)
		tb.Add(fmt.Sprint(n), f(r.get(cell, "baton", "rate"), "%.0f"), f(r.get(cell, "redsync", "rate"), "%.0f"), f(r.get(cell, "baton", "ratio"), "%.2f"),
			f(r.get(cell, "baton", "cpu"), "%.1f"), f(r.get(cell, "redsync", "cpu"), "%.1f"))
	}
	p("%s\n", tb.String())

	p("## C. Contended: %d goroutines on one key, 1 master\n\n", contenders)
	p("Each goroutine: lock (deadline %v), hold %v (time.Sleep), unlock, pause, repeat. "+
		"handoff = start of Unlock by A to the next successful lock return by B ≠ A; "+
		"re-acq = share of acquisitions made by the goroutine that unlocked last; "+
		"wait = attempt start to acquired (successful attempts); "+
		"cmds/acq = commands sent (go-redis hooks on every client of the library) / acquisitions; "+
		"failed = failed attempts / attempts started in the window, summed over repetitions.\n\n",
		b.cfg.timeout, holdTime)
	tc := mdtable.Table{
		Header: []string{"library", "pause", "acq/s", "handoff p50 ms", "handoff p99 ms", "re-acq", "wait p99 ms", "wait max ms", "cmds/acq", "failed"},
		Align:  []byte("lrrrrrrrrr"),
	}
	var overlaps, unlockErrs int64
	for _, pause := range pauses {
		cell := fmt.Sprintf("C/%v", pause)
		for _, c := range b.cellC {
			g := func(m string) stats.Summary { return r.get(cell, c.name, m) }
			tc.Add(c.name, fmt.Sprintf("%d ms", pause.Milliseconds()), f(g("acq"), "%.0f"), f(g("h50"), "%.2f"), f(g("h99"), "%.2f"),
				pct(g("reacq")), f(g("w99"), "%.1f"), f(g("wmax"), "%.0f"), f(g("cmds"), "%.2f"),
				fmt.Sprintf("%d/%d", r.totals[key(cell, c.name, "failed")], r.totals[key(cell, c.name, "attempts")]))
			overlaps += r.totals[key(cell, c.name, "overlaps")]
			unlockErrs += r.totals[key(cell, c.name, "unlockErrs")]
		}
	}
	p("%s\n", tc.String())

	p("Settings and caveats:\n\n")
	p("- baton Lock: non-fair, waiters woken over pub/sub (one local waiter per release), auto-extension on (its default; no extension fires within a %v hold). baton Lock fair: the same with WithFair().\n", holdTime)
	p("- redsync: NewMutex defaults (32 tries, retry delay uniform random in [50ms, 250ms), expiry 8s); in A and B WithTries(1).\n")
	p("- redislock: RetryStrategy LinearBackoff(%v) (its default is NoRetry; the package example uses LimitRetry(LinearBackoff(100ms), 3); here unlimited) with the %v attempt deadline; in A its default single attempt.\n", redislockGap, b.cfg.timeout)
	p("- Commands are counted client-side; handshakes (HELLO, CLIENT) are left out. Pub/sub does not pass go-redis hooks: baton's SUBSCRIBE and the wake messages it receives are not counted, and its PUBLISH runs inside the release script, so it is not a separate command either.\n")
	p("- Waits and failures cover attempts started inside the window, followed to their end (the other goroutines keep contending meanwhile); acquisitions, handoffs and commands count inside the window.\n")
	p("- Mutual-exclusion check: %d overlapping holds seen; %d failed unlocks.\n", overlaps, unlockErrs)
	if len(b.errs) > 0 {
		ks := make([]string, 0, len(b.errs))
		for k := range b.errs {
			ks = append(ks, k)
		}
		slices.Sort(ks)
		for _, k := range ks {
			p("- First error in %s: %s\n", strings.ReplaceAll(k, "|", " "), b.errs[k])
		}
	}
	return w.String()
}

// describeMachine lists what the numbers depend on.
func describeMachine(cfg config, began time.Time) []string {
	return machine.Describe(began, "persistence off, loopback, one process per master, started by the benchmark",
		[]string{"github.com/batonhq/baton", "github.com/go-redsync/redsync/v4", "github.com/bsm/redislock", "github.com/redis/go-redis/v9"}, "cd bench && go run ./cmd/lockbench", cfg.args)
}
