package baton

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hibiken/asynq"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/chain"
	"github.com/batonhq/baton/internal/handoff"
	"github.com/batonhq/baton/internal/history"
	"github.com/batonhq/baton/internal/wiring"
	"github.com/batonhq/baton/jobs"
	"github.com/batonhq/baton/locking"
	"github.com/batonhq/baton/scheduler"
)

// Backfills: the ticks of a window that never ran, dispatched through the
// tick claim (Backfill), and a chain's links backfilled in order
// (BackfillChain).

// MaxBackfill is the most ticks one Backfill dispatches.
const MaxBackfill = 10000

// MaxChainAwait bounds how long a link of a chain's backfill waits for its
// parents' ticks after its dispatch (BackfillChain).
const MaxChainAwait = 24 * time.Hour

// BackfillPlan is what Backfill found in its window, and did.
type BackfillPlan struct {
	Job string `json:"job"`
	// Ticks are the job's ticks in the window that never ran (no run in
	// the history, and not recorded done): what a dry run lists and a
	// backfill dispatches.
	Ticks []time.Time `json:"ticks"`
	// Ran counts the window's ticks that ran already.
	Ran int `json:"ran"`
	// AwaitUntil is, in a chain's backfill (BackfillChain), until when
	// this link's ticks wait for their parents' (zero: they run at once).
	AwaitUntil time.Time `json:"await_until,omitzero"`
	// Dispatched, Decided and Failed are what the backfill did (empty for a
	// dry run): see scheduler.BackfillResult.
	Dispatched []time.Time `json:"dispatched,omitempty"`
	Decided    []time.Time `json:"decided,omitempty"`
	Failed     []time.Time `json:"failed,omitempty"`
	Reason     string      `json:"reason,omitempty"`
}

// ErrBackfillWindow is returned by Backfill for a window it cannot serve:
// reversed, in the future, over MaxBackfill ticks, or reaching back before
// what the history and the tick records can tell.
var ErrBackfillWindow = errors.New("baton: bad backfill window")

// Backfill dispatches job's ticks in [from, to] that never ran: ticks with
// no run in the history, recorded missed or paused, or not recorded at all.
// Each is dispatched exactly once, also when several backfills or the
// schedule race for it: a backfilled tick goes through the tick claim (done
// or leased ticks are not granted) and is enqueued under the tick's own
// task ID (asynq refuses a second). A dry run only lists them. Only cron
// jobs are backfilled; the window must be past and within what baton can
// tell: the job's history reaches back history.max_age (or, once full,
// history.runs runs), and its tick records the job's retention. A
// backfilled tick runs at once, also of a job run after others: to
// backfill a chain's links in order, see BackfillChain.
func (c *Cluster) Backfill(ctx context.Context, job string, from, to time.Time, dryRun bool) (BackfillPlan, error) {
	now, err := c.backfillNow(ctx, from, to)
	if err != nil {
		return BackfillPlan{Job: job}, err
	}
	l, err := c.planBackfill(ctx, job, from, to, now, nil)
	if err != nil || dryRun || len(l.plan.Ticks) == 0 {
		return l.plan, err
	}
	if err := l.dispatchable(); err != nil {
		return l.plan, err
	}
	if err := c.forgetNotRun(ctx, []*backfillLink{l}); err != nil {
		return l.plan, err
	}
	err = c.dispatchBackfill(ctx, &l.plan, nil)
	return l.plan, err
}

// BackfillChain is Backfill of job and of every job run after it (after:,
// at any depth), over one window, each link's ticks waiting in the queue
// for its parents' as a scheduled chain's do: job's ticks that never ran
// are dispatched and run at once; then each job run after it, parents
// before children, has its ticks in the window that never ran, at the
// instants a parent of the chain ticks at, dispatched to wait for that
// tick of each of its parents to end (handed back without spending an
// attempt) and then run, or be skipped when a parent did not succeed
// (on_parent_failure: skip). A link waits until AwaitUntil: as long as its
// parents' backfilled ticks may take to end (their jobs' run windows,
// along the chain, plus its starting deadline), at most MaxChainAwait.
//
// A parent's tick the backfill does not dispatch (it ran, or was decided
// not to run) holds its children's by its outcome record; where that
// record is gone, the run history's end of it is written in its place
// before anything is dispatched. A parent's tick still running is waited
// for. A parent outside the chain whose tick at the instant never ran is
// waited for until AwaitUntil (backfill it first).
//
// Every link is checked before any is dispatched: a link that cannot be
// backfilled (not a cron job, a window its history cannot tell, several
// ticks of a job with concurrency other than allow) refuses the whole
// chain. A dry run returns the plans. The plans come in dispatch order;
// when a link fails to dispatch, the links after it are not dispatched
// (run the backfill again: ticks dispatched are not dispatched twice).
func (c *Cluster) BackfillChain(ctx context.Context, job string, from, to time.Time, dryRun bool) ([]BackfillPlan, error) {
	c, err := c.withRuntimeChildren(ctx)
	if err != nil {
		return nil, err
	}
	now, err := c.backfillNow(ctx, from, to)
	if err != nil {
		return nil, err
	}
	root, err := c.planBackfill(ctx, job, from, to, now, nil)
	if err != nil {
		return nil, err
	}
	links := []*backfillLink{root}
	byName := map[string]*backfillLink{job: root}
	for _, d := range c.cfg.Descendants(job) {
		// an instant of the window at which a parent of the chain ticks
		inChain := func(at time.Time) bool {
			for _, p := range c.cfg.ParentsAt(d, at) {
				if pl := byName[p.Name]; pl != nil && pl.window[at.UnixMilli()] {
					return true
				}
			}
			return false
		}
		l, err := c.planBackfill(ctx, d.Name, from, to, now, inChain)
		if err != nil {
			return plans(links), err
		}
		links = append(links, l)
		byName[d.Name] = l
	}
	c.setAwaits(links, byName, time.Now())
	if dryRun {
		return plans(links), nil
	}
	for _, l := range links {
		if err := l.dispatchable(); err != nil {
			return plans(links), err
		}
	}
	if err := c.seedOutcomes(ctx, links[1:], byName); err != nil {
		return plans(links), err
	}
	if err := c.forgetNotRun(ctx, links[:len(links)-1]); err != nil {
		return plans(links), err
	}
	for _, l := range links {
		if len(l.plan.Ticks) == 0 {
			continue
		}
		var await map[string]time.Time
		if !l.plan.AwaitUntil.IsZero() {
			await = map[string]time.Time{l.job.Name: l.plan.AwaitUntil}
		}
		if err := c.dispatchBackfill(ctx, &l.plan, await); err != nil {
			return plans(links), err
		}
		if len(l.plan.Failed) > 0 {
			return plans(links), fmt.Errorf("baton: backfill of %s: %d ticks not dispatched (%s); the links after it were not dispatched: run the backfill again",
				l.job.Name, len(l.plan.Failed), l.plan.Reason)
		}
	}
	return plans(links), nil
}

// backfillLink is one job of a backfill: its plan, and the run history
// it was made from.
type backfillLink struct {
	job  *config.Job
	plan BackfillPlan
	recs []jobs.RunRecord
	// window: the link's ticks in the window (ran or not), unix ms
	window map[int64]bool
}

// AnyDispatched reports whether any of plans dispatched a tick: a chain's
// backfill that failed after that dispatched in part.
func AnyDispatched(plans []BackfillPlan) bool {
	for _, p := range plans {
		if len(p.Dispatched) > 0 {
			return true
		}
	}
	return false
}

func plans(links []*backfillLink) []BackfillPlan {
	out := make([]BackfillPlan, len(links))
	for i, l := range links {
		out[i] = l.plan
	}
	return out
}

// backfillNow checks that [from, to] is a window (not reversed, not in
// the future) and returns the queue Redis's clock.
func (c *Cluster) backfillNow(ctx context.Context, from, to time.Time) (time.Time, error) {
	if to.Before(from) {
		return time.Time{}, fmt.Errorf("%w: the window ends (%s) before it starts (%s)", ErrBackfillWindow, to.Format(time.RFC3339), from.Format(time.RFC3339))
	}
	now, err := c.queue.Time(ctx).Result()
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: queue Redis %s: %w", locking.ErrUnavailable, wiring.DescribeRedis(c.cfg), err)
	}
	if to.After(now) {
		return time.Time{}, fmt.Errorf("%w: the window ends in the future (%s; Redis's clock: %s)", ErrBackfillWindow, to.Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	return now, nil
}

// planBackfill lists job's ticks in [from, to] (those keep says, or all
// when nil) and which of them never ran.
func (c *Cluster) planBackfill(ctx context.Context, job string, from, to, now time.Time, keep func(time.Time) bool) (*backfillLink, error) {
	l := &backfillLink{plan: BackfillPlan{Job: job}, window: map[int64]bool{}}
	j, ok := c.cfg.Job(job)
	switch {
	case !ok:
		return l, fmt.Errorf("%w: no job %q in the config", ErrUnknownJob, job)
	case j.Mode != config.ModeCron:
		return l, fmt.Errorf("%w: %q is a %s job; only cron jobs (run through the queue) can be backfilled", ErrNotTriggerable, job, j.Mode)
	}
	l.job = j
	var ticks []time.Time
	for _, t := range scheduler.Ticks(j.Sched, from.Add(-time.Nanosecond), to, MaxBackfill+1) {
		if keep == nil || keep(t) {
			ticks = append(ticks, t)
			l.window[t.UnixMilli()] = true
		}
	}
	if len(ticks) > MaxBackfill {
		return l, fmt.Errorf("%w: the window holds more than %d ticks of %s: backfill it in parts", ErrBackfillWindow, MaxBackfill, job)
	}
	since, err := history.Coverage(ctx, c.queue, c.cfg, job, now)
	if err != nil {
		return l, err
	}
	if records := now.Add(-c.cfg.Retention(j)); records.Before(since) {
		since = records
	}
	if len(ticks) > 0 && ticks[0].Before(since) {
		return l, fmt.Errorf("%w: %s's history and tick records reach back to %s only; whether the ticks before it ran cannot be told: start the window there",
			ErrBackfillWindow, job, since.UTC().Truncate(time.Second).Add(time.Second).Format(time.RFC3339))
	}
	if l.recs, err = history.Read(ctx, c.queue, c.cfg.Namespace, job, 0); err != nil {
		return l, err
	}
	ran := map[int64]bool{}
	for _, r := range l.recs {
		if !r.Manual && r.Status != jobs.StatusMissed && r.Status != jobs.StatusPaused {
			// dispatched (a skipped or replaced tick too: its record says
			// done, and a claim would not grant it again)
			ran[r.Tick.UnixMilli()] = true
		}
	}
	for _, t := range ticks {
		if ran[t.UnixMilli()] {
			l.plan.Ran++
			continue
		}
		l.plan.Ticks = append(l.plan.Ticks, t.UTC())
	}
	return l, nil
}

// dispatchable refuses a plan whose ticks cannot be dispatched together.
func (l *backfillLink) dispatchable() error {
	if l.job.Concurrency != config.ConcurrencyAllow && len(l.plan.Ticks) > 1 {
		// dispatched together, all but one would be skipped (forbid) or
		// replaced, and then count as dispatched
		return fmt.Errorf("%w: %s has concurrency %s: its ticks cannot run side by side, so a backfill dispatches one at a time: give a window of one tick (the first is %s), or set concurrency: allow",
			ErrBackfillWindow, l.job.Name, l.job.Concurrency, l.plan.Ticks[0].Format(time.RFC3339))
	}
	return nil
}

// dispatchBackfill dispatches plan's ticks through a scheduler of its own,
// their tasks waiting for their parents as await says (nil: none).
func (c *Cluster) dispatchBackfill(ctx context.Context, plan *BackfillPlan, await map[string]time.Time) error {
	j, _ := c.cfg.Job(plan.Job)
	d := handoff.New(c.cfg, asynq.NewClientFromRedisClient(c.queue), nil, handoff.WithQueueRedis(c.queue), handoff.WithParentsAwait(await))
	s, err := scheduler.New(c.locks, []scheduler.Job{schedulerJob(j)}, d, schedulerOptions(c.cfg, "backfill")...)
	if err != nil {
		return err
	}
	res, err := s.Backfill(ctx, plan.Job, plan.Ticks)
	plan.Dispatched, plan.Decided, plan.Failed, plan.Reason = res.Dispatched, res.Decided, res.Failed, res.Reason
	return err
}

// setAwaits sets each link's AwaitUntil, from now: the root's ticks do not
// wait; a link's wait for its parents ends when the latest of its parents
// in the chain may have ended its tick (that parent's own wait, plus its
// run window), plus its own starting deadline, at most MaxChainAwait.
func (c *Cluster) setAwaits(links []*backfillLink, byName map[string]*backfillLink, now time.Time) {
	wait := map[string]time.Duration{}
	for _, l := range links[1:] {
		var w time.Duration
		for _, p := range l.job.After {
			if pl := byName[p]; pl != nil {
				d := MaxChainAwait // saturating: RunWindow is MaxInt64 when unbounded
				if rw := handoff.RunWindow(c.cfg, pl.job); rw < MaxChainAwait-wait[p] {
					d = wait[p] + rw
				}
				w = max(w, d)
			}
		}
		wait[l.job.Name] = min(w+l.job.StartingDeadline, MaxChainAwait)
		l.plan.AwaitUntil = now.Add(wait[l.job.Name]).UTC().Truncate(time.Millisecond)
	}
}

// seedOutcomes writes, for each tick a link of the chain will wait on,
// the outcome record of each parent's tick the backfill does not dispatch
// and whose record is gone, from the parent's run history: its last
// record of the tick, when that is an end (a success; a failure of its
// last attempt; a tick skipped, dropped, replaced, refused or stopped). A
// parent's tick still running, missed or paused (a backfill may run it
// yet), or never recorded, is left to end (or not) by itself.
func (c *Cluster) seedOutcomes(ctx context.Context, links []*backfillLink, byName map[string]*backfillLink) error {
	hist := map[string][]jobs.RunRecord{}
	planned := map[string]map[int64]bool{} // the ticks each link dispatches
	for name, l := range byName {
		hist[name] = l.recs
		planned[name] = make(map[int64]bool, len(l.plan.Ticks))
		for _, at := range l.plan.Ticks {
			planned[name][at.UnixMilli()] = true
		}
	}
	for _, l := range links {
		for _, at := range l.plan.Ticks {
			parents := c.cfg.ParentsAt(l.job, at)
			for _, p := range parents {
				if pl := byName[p.Name]; pl != nil && planned[p.Name][at.UnixMilli()] {
					continue // dispatched by this backfill: it writes its own
				}
				if _, ok := hist[p.Name]; !ok {
					recs, err := history.Read(ctx, c.queue, c.cfg.Namespace, p.Name, 0)
					if err != nil {
						return err
					}
					hist[p.Name] = recs
				}
				o, ok := chain.EndOf(hist[p.Name], p.MaxRetry, at)
				if !ok {
					continue
				}
				have, err := chain.Read(ctx, c.queue, c.cfg.Namespace, []string{p.Name}, at)
				if err != nil {
					return fmt.Errorf("baton: backfill: read %s@%s's outcome: %w", p.Name, at.Format(time.RFC3339), err)
				}
				if _, ok := have[p.Name]; ok {
					continue
				}
				ttl := time.Until(l.plan.AwaitUntil) + handoff.OutcomeTTL(c.cfg, p.Name)
				if err := chain.Record(ctx, c.queue, c.cfg.Namespace, p.Name, at, ttl, o); err != nil {
					return fmt.Errorf("baton: backfill: write %s@%s's outcome from its history: %w", p.Name, at.Format(time.RFC3339), err)
				}
			}
		}
	}
	return nil
}

// forgetNotRun forgets the outcome records of the ticks the links will
// dispatch that say they did not run (the scheduler writes one for a tick
// it missed or paused): the children dispatched after them wait for the
// backfilled run's end instead of being skipped for the old miss.
func (c *Cluster) forgetNotRun(ctx context.Context, links []*backfillLink) error {
	for _, l := range links {
		if len(c.cfg.Children(l.job.Name)) == 0 {
			continue
		}
		for _, at := range l.plan.Ticks {
			if err := chain.Forget(ctx, c.queue, c.cfg.Namespace, l.job.Name, at); err != nil {
				return fmt.Errorf("baton: backfill: %w", err)
			}
		}
	}
	return nil
}

// childIndex is a config.ChildSource of the runtime schedules that run
// after others, read from the store at once (withRuntimeChildren); a
// lookup of a job goes to the Cluster's config.
type childIndex struct {
	base     *config.Config
	children map[string][]*config.Job
}

func (x *childIndex) ScheduleJob(name string) (*config.Job, bool) { return x.base.Job(name) }

func (x *childIndex) ScheduleChildren(job string) []*config.Job { return x.children[job] }

// withRuntimeChildren returns a copy of c whose config also knows which
// runtime schedules run after which job: read from every stored
// definition that names parents (the Cluster holds no copy of the store,
// as a replica does), so that a chain's backfill finds its runtime links.
func (c *Cluster) withRuntimeChildren(ctx context.Context) (*Cluster, error) {
	x := &childIndex{base: c.cfg, children: map[string][]*config.Job{}}
	for after := ""; ; {
		recs, _, next, err := c.scheduleStore().List(ctx, "", after, 1000)
		if err != nil {
			return nil, fmt.Errorf("baton: backfill: read the runtime schedules for the chain's links: %w", err)
		}
		for _, r := range recs {
			if !bytes.Contains(r.Doc, []byte(`"after":`)) {
				continue
			}
			j, ok := c.cfg.Job(config.ScheduleJobName(r.ID))
			if !ok {
				continue // refused: the replicas do not run it either
			}
			for _, p := range j.After {
				x.children[p] = append(x.children[p], j)
			}
		}
		if after = next; after == "" {
			break
		}
	}
	cc := *c
	cc.cfg = c.cfg.WithSource(x)
	return &cc, nil
}
