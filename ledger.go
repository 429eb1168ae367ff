package baton

// The tick ledger: every scheduled tick of a window with what became of
// it, read from the three places that know: the job's schedule (which
// ticks there were), the run history on the queue Redis (how each run
// ended, and the ticks that did not run, and why) and the tick records on
// the lock masters (dispatched, missed or paused, or being dispatched now,
// for as long as they are kept).

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/chain"
	"github.com/batonhq/baton/internal/history"
	"github.com/batonhq/baton/internal/redact"
	"github.com/batonhq/baton/internal/roster"
	"github.com/batonhq/baton/internal/wiring"
	"github.com/batonhq/baton/jobs"
	"github.com/batonhq/baton/locking"
	"github.com/batonhq/baton/scheduler"
)

// MaxLedgerTicks is the most scheduled ticks one Ticks call lists: a longer
// window is refused (ErrTickWindow).
const MaxLedgerTicks = 10000

// MaxLedgerTicksAll is the most scheduled ticks one TicksAll call lists,
// all jobs together: an answer is built and encoded in memory, and a read
// may need no token (http.public_reads).
const MaxLedgerTicksAll = 10 * MaxLedgerTicks

// DefaultLedgerTicks and DefaultLedgerSpan make the window Ticks reads
// when it is given no start: the last DefaultLedgerSpan (24h) before its
// end, cut to the last DefaultLedgerTicks (100) ticks of the schedule.
const (
	DefaultLedgerTicks = 100
	DefaultLedgerSpan  = 24 * time.Hour
)

// ErrTickWindow is returned by Ticks for a window it does not read: one
// that ends before it starts, or holds more than MaxLedgerTicks ticks.
var ErrTickWindow = errors.New("baton: bad tick window")

// Outcome is what became of a tick, as the tick ledger tells it.
type Outcome string

// The outcomes of LedgerTick.Outcome.
const (
	OutcomeOK          Outcome = "ok"
	OutcomeFailed      Outcome = "failed"      // failed, timed out or lease lost: Status says which
	OutcomeRunning     Outcome = "running"     // started, not ended
	OutcomeDispatched  Outcome = "dispatched"  // handed to a queue, not started (yet)
	OutcomeDispatching Outcome = "dispatching" // a replica holds the tick's claim now
	OutcomeSkipped     Outcome = "skipped"     // not run: the job was running (forbid), a newer tick held it, or skipped on request (Cluster.Skip)
	OutcomeReplaced    Outcome = "replaced"    // stopped, or not started, for a newer tick (replace)
	OutcomeDropped     Outcome = "dropped"     // not run: the job's buffer was full
	OutcomeMissed      Outcome = "missed"      // not dispatched within its starting deadline
	OutcomePaused      Outcome = "paused"      // not dispatched: the job was paused
	OutcomeRefused     Outcome = "refused"     // not run: the worker refused its task
	OutcomeStopped     Outcome = "stopped"     // stopped on request: its runtime schedule was deleted with its runs stopped
	OutcomeDue         Outcome = "due"         // due, within its starting deadline, not claimed yet
	OutcomeNotDue      Outcome = "not_due"     // in the future
	OutcomeExcluded    Outcome = "excluded"    // a tick of the spec on a day the job's calendars leave out: not due
	OutcomeUnknown     Outcome = "unknown"     // before KnownFrom, or a run whose end was never recorded
)

// TickLedger is a job's ticks in a window, each with its outcome.
type TickLedger struct {
	Job      string `json:"job"`
	Schedule string `json:"schedule,omitempty"`
	Timezone string `json:"timezone,omitempty"`
	// From and To are the window (both included), Now when it was read
	// (the queue Redis's clock).
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	Now  time.Time `json:"now"`
	// KnownFrom is where baton's knowledge of the job's ticks begins: the
	// history is trimmed (history.runs, history.max_age) and the tick
	// records expire (the job's starting deadline and margins) before it.
	// A tick due before it that has no record is "unknown", not "missed".
	KnownFrom time.Time `json:"known_from"`
	// Ticks are the window's scheduled ticks, its manual runs and any run
	// of a tick the schedule no longer has, oldest first.
	Ticks []LedgerTick `json:"ticks"`
	// Warnings name what could not be read (history entries that do not
	// parse, lock masters that did not answer): the ticks are as far as
	// the rest tells.
	Warnings []string `json:"warnings,omitempty"`
}

// LedgerTick is one tick of the ledger and what became of it. The run's
// fields are those of its history record (jobs.RunRecord), empty for a
// tick that did not run.
type LedgerTick struct {
	Tick    time.Time `json:"tick"`
	Outcome Outcome   `json:"outcome"`
	// Status is how the history records it (jobs.Status), when it does.
	Status jobs.Status `json:"status,omitempty"`
	// Manual: a trigger's run, not a tick of the schedule. Backfill: a
	// tick run by a backfill or a resume's catch-up.
	Manual   bool   `json:"manual,omitempty"`
	Backfill bool   `json:"backfill,omitempty"`
	RunID    string `json:"run_id,omitempty"`
	Attempt  int    `json:"attempt,omitempty"`
	Fence    int64  `json:"fence,omitempty"`
	// ExitCode (exec jobs) or HTTPStatus (http jobs) of the run's end.
	ExitCode   *int      `json:"exit_code,omitempty"`
	HTTPStatus int       `json:"http_status,omitempty"`
	Dispatcher string    `json:"dispatcher,omitempty"` // the replica that dispatched it
	Worker     string    `json:"worker,omitempty"`     // the replica that ran it
	Started    time.Time `json:"started,omitzero"`
	Ended      time.Time `json:"ended,omitzero"`
	// DurationMS is how long the run took, in milliseconds (when it ended).
	DurationMS int64 `json:"duration_ms,omitempty"`
	// Reason says why it failed or did not run; Output is a failed run's
	// output tail (secrets masked). Both are text from Redis: escape them
	// to show them.
	Reason string `json:"reason,omitempty"`
	Output string `json:"output,omitempty"`
	// Pause is who paused the job, since when and why, for a paused tick
	// (and for ticks ahead while the job is paused), when known.
	Pause *PauseNote `json:"pause,omitempty"`
}

// Ticks lists job's ticks due in [from, to] in order, each with its
// outcome (see Outcome), and the window's manual runs, marked. A zero to
// is now (by the queue Redis's clock); a zero from starts the window
// DefaultLedgerSpan before to, or at the DefaultLedgerTicks-th last tick
// up to to, whichever is later. A window that ends before it starts or
// holds more than MaxLedgerTicks ticks fails with ErrTickWindow; an
// unknown job with ErrUnknownJob, a singleton (no ticks) with
// ErrNotTriggerable.
//
// The ledger is built from the schedule, the run history and the tick
// records, and knows what they keep: TickLedger.KnownFrom says where that
// ends. It reads with a bounded number of round trips whatever the window:
// three to the queue Redis and two to each lock master, side by side. It
// fails with locking.ErrUnavailable when the queue Redis does not answer;
// what else cannot be read is in TickLedger.Warnings.
func (c *Cluster) Ticks(ctx context.Context, job string, from, to time.Time) (*TickLedger, error) {
	j, ok := c.cfg.Job(job)
	deleted := false
	switch {
	case !ok && isScheduleName(job):
		// a deleted runtime schedule: what its history still keeps
		j, deleted = &config.Job{Name: job, Mode: config.ModeCron, Sched: scheduler.ScheduleFunc(func(time.Time) time.Time { return time.Time{} }), Location: time.UTC}, true
	case !ok:
		return nil, fmt.Errorf("%w: no job %q in the config", ErrUnknownJob, job)
	case j.Mode == config.ModeSingleton || j.Sched == nil:
		return nil, fmt.Errorf("%w: job %q is a singleton: it has no ticks", ErrNotTriggerable, job)
	}
	ls, err := c.ledgers(ctx, []*config.Job{j}, from, to)
	if err != nil {
		return nil, err
	}
	if deleted {
		ls[0].Schedule = ""
		ls[0].Warnings = append(ls[0].Warnings, fmt.Sprintf("no runtime schedule %s now (deleted?): the ledger lists the runs its history still keeps, no scheduled tick", job[1:]))
	}
	return ls[0], nil
}

// TicksAll is Ticks of every job of the job list that has ticks
// (singletons have none), in the config's order. Runtime schedules are not
// in it: there may be 100,000 of them, so their ledgers are read one by
// one, by job name ("@" + id: Ticks, config.ScheduleJobName). Each is over the window [from, to] with Ticks's
// defaults and limits (a job whose window holds more than MaxLedgerTicks
// ticks fails the call, naming it, and so do more than MaxLedgerTicksAll
// ticks of all jobs together). It reads in the round trips of one
// Ticks, whatever the number of jobs: one pipeline per Redis for each
// read, the jobs side by side in it.
func (c *Cluster) TicksAll(ctx context.Context, from, to time.Time) ([]*TickLedger, error) {
	var js []*config.Job
	for i := range c.cfg.Jobs {
		if j := &c.cfg.Jobs[i]; j.Mode != config.ModeSingleton && j.Sched != nil {
			js = append(js, j)
		}
	}
	return c.ledgers(ctx, js, from, to)
}

// ledgers builds the ledgers of js over [from, to] (see Ticks), reading
// each source once for all of them.
func (c *Cluster) ledgers(ctx context.Context, js []*config.Job, from, to time.Time) ([]*TickLedger, error) {
	now, err := c.queue.Time(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("%w: queue Redis %s: %w", locking.ErrUnavailable, wiring.DescribeRedis(c.cfg), err)
	}
	now = now.UTC()
	ls := make([]*TickLedger, len(js))
	scheduled := make([][]time.Time, len(js))
	names := make([]string, len(js))
	total := 0
	for i, j := range js {
		l, ticks, err := window(j, from, to, now)
		if err != nil {
			return nil, err
		}
		ls[i], scheduled[i], names[i] = l, ticks, j.Name
		if total += len(ticks); total > MaxLedgerTicksAll {
			return nil, fmt.Errorf("%w: the window holds more than %d ticks of all jobs together: ask for a shorter one, or for one job's", ErrTickWindow, MaxLedgerTicksAll)
		}
	}
	since, err := history.Coverages(ctx, c.queue, c.cfg, names, now)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", locking.ErrUnavailable, err)
	}
	// the runs of the window's ticks, no further back: a run's events are
	// written at or after its tick, by Redis's clock (a skew's margin)
	histories, err := history.ReadJobsSince(ctx, c.queue, c.cfg.Namespace, names, earliest(ls).Add(-c.cfg.MaxClockSkew-time.Minute))
	var histWarning string
	if err != nil {
		if !errors.Is(err, jobs.ErrCorrupt) {
			return nil, fmt.Errorf("%w: %w", locking.ErrUnavailable, err)
		}
		histWarning = c.cfg.MaskSecrets(err.Error())
	}
	// the lock masters: the pause flags and the records of the ticks still
	// kept, side by side
	kept := make(map[string][]time.Time, len(js))
	for i, j := range js {
		kept[j.Name] = within(scheduled[i], now.Add(-c.cfg.Retention(j)), now.Add(c.cfg.MaxClockSkew))
	}
	var (
		pause   map[string]pauseState
		records map[string]map[int64]tickRecord
		// from when the masters' records tell (their markers' birth)
		recordsFrom time.Time
		pErr        error
		rErr        error
		wg          sync.WaitGroup
	)
	// when the deployment's first replica started, beside the other reads
	var deployedAt time.Time
	wg.Go(func() {
		sctx, cancel := context.WithTimeout(ctx, statusStep)
		defer cancel()
		if ms, err := c.queue.Get(sctx, deployedKey(c.cfg.Namespace)).Int64(); err == nil {
			deployedAt = time.UnixMilli(ms)
		}
	})
	deployed := func() time.Time { return deployedAt }
	// the roster, read only when a run is recorded running (most windows
	// have none: no round trip for them)
	replicas := sync.OnceValue(func() replicaSet {
		sctx, cancel := context.WithTimeout(ctx, statusStep)
		defer cancel()
		return c.replicaSet(sctx)
	})
	wg.Go(func() {
		sctx, cancel := context.WithTimeout(ctx, statusStep)
		defer cancel()
		pause, pErr = c.pauseStates(sctx, names)
	})
	wg.Go(func() {
		sctx, cancel := context.WithTimeout(ctx, statusStep)
		defer cancel()
		records, recordsFrom, rErr = c.tickRecords(sctx, kept)
	})
	wg.Wait()
	// a read may need no token (http.public_reads): the warnings name
	// masters by their index, without address or error text
	var warnings []string
	if histWarning != "" {
		warnings = append(warnings, histWarning)
	}
	switch {
	case errors.Is(pErr, locking.ErrUnavailable):
		warnings = append(warnings, "pause flags: fewer than a quorum of lock masters answered: whether the job is paused now is not known")
	case pErr != nil:
		warnings = append(warnings, c.cfg.MaskSecrets(pErr.Error()))
	}
	if rErr != nil {
		warnings = append(warnings, rErr.Error())
	}
	for i, j := range js {
		l := ls[i]
		l.KnownFrom = since[j.Name]
		if kept := now.Add(-c.cfg.Retention(j)); kept.Before(l.KnownFrom) && records != nil {
			// else no tick record was read: the history alone tells; and
			// a master restarted empty holds records from its birth only
			l.KnownFrom = kept
			if recordsFrom.After(kept) && recordsFrom.Before(since[j.Name]) {
				l.KnownFrom = recordsFrom
			}
		}
		for _, w := range warnings {
			if strings.Contains(w, strconv.Quote(j.Name)) || !strings.HasPrefix(w, history.ReadError) {
				l.Warnings = append(l.Warnings, w)
			}
		}
		var note *PauseNote
		switch {
		case j.Paused:
			note = &PauseNote{By: "config"}
		case pause[j.Name].masters >= len(c.masters)/2+1:
			note = pause[j.Name].note
			if note == nil {
				note = &PauseNote{By: "baton pause"}
			}
		}
		b := ledgerBuilder{cfg: c.cfg, job: j, now: now, known: l.KnownFrom, histFrom: since[j.Name], records: records[j.Name], pausedNow: note, replicas: replicas, deployed: deployed}
		l.Ticks = b.build(scheduled[i], inWindow(histories[j.Name], l.From, l.To))
		l.Ticks = withExcluded(c.cfg, j, l, scheduled[i])
		c.chainWaits(ctx, j, l)
	}
	return ls, nil
}

// chainWaits says, of each dispatched tick of chained job j that no run
// has started yet, which parents' ticks it waits for ("waiting for
// extract@T"), from their outcome records (a tick that waits for none is
// about to run).
func (c *Cluster) chainWaits(ctx context.Context, j *config.Job, l *TickLedger) {
	if len(j.After) == 0 {
		return
	}
	for i := range l.Ticks {
		lt := &l.Ticks[i]
		if lt.Outcome != OutcomeDispatched {
			continue
		}
		var names []string
		for _, p := range c.cfg.ParentsAt(j, lt.Tick) {
			names = append(names, p.Name)
		}
		if len(names) == 0 {
			names = j.After // as the worker does: a tick of another list's parent schedule
		}
		sctx, cancel := context.WithTimeout(ctx, statusStep)
		outs, err := chain.Read(sctx, c.queue, c.cfg.Namespace, names, lt.Tick)
		cancel()
		if err != nil {
			continue // the ledger says dispatched, as it would without the chain
		}
		var waiting []string
		for _, n := range names {
			if _, ended := outs[n]; !ended {
				waiting = append(waiting, n+"@"+lt.Tick.UTC().Format(time.RFC3339))
			}
		}
		if len(waiting) > 0 {
			lt.Reason = "waiting for " + strings.Join(waiting, ", ")
		}
	}
}

// withExcluded adds to l's ticks the ticks of j's spec in l's window that
// its calendars leave out (at most MaxLedgerTicks in all), each excluded
// with the calendars that leave it out.
func withExcluded(cfg *config.Config, j *config.Job, l *TickLedger, scheduled []time.Time) []LedgerTick {
	if j.Unfiltered == nil {
		return l.Ticks
	}
	out := l.Ticks
	for _, t := range scheduler.Ticks(j.Unfiltered, l.From.Add(-time.Nanosecond), l.To, MaxLedgerTicks) {
		if len(out) >= MaxLedgerTicks {
			break
		}
		if _, found := slices.BinarySearchFunc(scheduled, t, time.Time.Compare); found {
			continue
		}
		out = append(out, LedgerTick{Tick: t.UTC(), Outcome: OutcomeExcluded, Reason: "excluded: " + cfg.ExcludedBy(j, t)})
	}
	slices.SortStableFunc(out, func(a, b LedgerTick) int { return a.Tick.Compare(b.Tick) })
	return out
}

// window is the empty ledger of j over [from, to] with the defaults filled
// in (see Ticks), and the window's scheduled ticks.
func window(j *config.Job, from, to, now time.Time) (*TickLedger, []time.Time, error) {
	if to.IsZero() {
		to = now
	}
	if from.IsZero() {
		from = defaultFrom(j.Sched, to)
	}
	from, to = from.UTC(), to.UTC()
	if to.Before(from) {
		return nil, nil, fmt.Errorf("%w: the window ends (%s) before it starts (%s)", ErrTickWindow, to.Format(time.RFC3339), from.Format(time.RFC3339))
	}
	ticks := scheduler.Ticks(j.Sched, from.Add(-time.Nanosecond), to, MaxLedgerTicks+1)
	if len(ticks) > MaxLedgerTicks {
		return nil, nil, fmt.Errorf("%w: the window from %s to %s holds more than %d ticks of %s (the most one read lists): ask for a shorter one",
			ErrTickWindow, from.Format(time.RFC3339), to.Format(time.RFC3339), MaxLedgerTicks, j.Name)
	}
	l := &TickLedger{Job: j.Name, Schedule: j.Schedule, Timezone: j.Location.String(), From: from, To: to, Now: now, Ticks: []LedgerTick{}}
	if j.At != "" {
		l.Schedule = "at " + j.At
	}
	return l, ticks, nil
}

// defaultFrom is the start of the window that ends at to when none is
// given: DefaultLedgerSpan before to, or the DefaultLedgerTicks-th last
// tick of s up to to when that is later.
func defaultFrom(s scheduler.Schedule, to time.Time) time.Time {
	from := to.Add(-DefaultLedgerSpan)
	var last [DefaultLedgerTicks]time.Time
	n := 0
	for t := s.Next(from.Add(-time.Nanosecond)); !t.IsZero() && !t.After(to); t = s.Next(t) {
		last[n%DefaultLedgerTicks] = t
		n++
	}
	if n >= DefaultLedgerTicks {
		return last[n%DefaultLedgerTicks] // the oldest of the last ones
	}
	return from
}

// within are the ticks of ticks whose records may still be kept: due
// from oldest up to newest.
func within(ticks []time.Time, oldest, newest time.Time) []time.Time {
	var out []time.Time
	for _, t := range ticks {
		if !t.Before(oldest) && !t.After(newest) {
			out = append(out, t)
		}
	}
	return out
}

// inWindow are the records of recs whose tick is in [from, to].
func inWindow(recs []jobs.RunRecord, from, to time.Time) []jobs.RunRecord {
	var out []jobs.RunRecord
	for _, r := range recs {
		if !r.Tick.Before(from) && !r.Tick.After(to) {
			out = append(out, r)
		}
	}
	return out
}

// tickRecord is what the lock masters hold for one tick.
type tickRecord struct {
	done, leased, paused, missed int // masters holding each
}

// tickRecords reads the records of the ticks of each job (by name) on
// every lock master, one pipeline of an MGET per job on each master, side
// by side. It fails when no master answered, and names by their index
// those that did not (the error text, which holds addresses, is left out).
func (c *Cluster) tickRecords(ctx context.Context, ticks map[string][]time.Time) (map[string]map[int64]tickRecord, time.Time, error) {
	out := map[string]map[int64]tickRecord{}
	var since time.Time
	var names []string
	for job, ts := range ticks {
		out[job] = map[int64]tickRecord{}
		if len(ts) > 0 {
			names = append(names, job)
		}
	}
	if len(names) == 0 {
		return out, since, nil
	}
	cmds := make([][]*redis.SliceCmd, len(c.masters))
	markers := make([]*redis.StringCmd, len(c.masters))
	markerKey := wiring.LockPrefix(c.cfg) + "marker"
	errs := make([]error, len(c.masters))
	var wg sync.WaitGroup
	for i, m := range c.masters {
		wg.Go(func() {
			pipe := m.Pipeline()
			// the master's marker: the records it holds are from its birth
			markers[i] = pipe.Get(ctx, markerKey)
			cmds[i] = make([]*redis.SliceCmd, len(names))
			for k, job := range names {
				keys := make([]string, len(ticks[job]))
				for n, t := range ticks[job] {
					keys[n] = scheduler.TickKey(c.cfg.Namespace, job, t)
				}
				cmds[i][k] = pipe.MGet(ctx, keys...)
			}
			if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
				errs[i] = err
			}
		})
	}
	wg.Wait()
	var failed []string
	for i := range c.masters {
		if errs[i] != nil {
			failed = append(failed, strconv.Itoa(i))
			continue
		}
		for k, job := range names {
			vals, err := cmds[i][k].Result()
			if err != nil {
				continue
			}
			for n, v := range vals {
				s, _ := v.(string)
				if s == "" {
					continue
				}
				ms := ticks[job][n].UnixMilli()
				r := out[job][ms]
				switch s {
				case "done":
					r.done++
				case "paused":
					r.paused++
				case "missed":
					r.missed++
				default:
					r.leased++ // a claim token
				}
				out[job][ms] = r
			}
		}
	}
	since = recordsSince(markers, len(c.masters)/2+1)
	if len(failed) > 0 {
		err := fmt.Errorf("baton: tick records: %d of %d lock masters did not answer (%s): the ticks they alone recorded are not known",
			len(failed), len(c.masters), strings.Join(failed, ", "))
		if len(failed) == len(c.masters) {
			return nil, since, err
		}
		return out, since, err
	}
	return out, since, nil
}

// recordsSince is from when the masters' tick records tell every claimed
// tick, by their markers' birth (a master restarted empty holds records
// from then only): a claim writes a quorum of masters, so a tick's record
// is left while fewer than a quorum were born after it, that is from the
// quorum-th newest birth on. Zero when a marker cannot be read.
func recordsSince(markers []*redis.StringCmd, quorum int) time.Time {
	var born []time.Time
	for _, m := range markers {
		v, err := m.Result()
		if err != nil {
			return time.Time{}
		}
		f := strings.Fields(v)
		if len(f) < 3 {
			return time.Time{}
		}
		ms, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			return time.Time{}
		}
		born = append(born, time.UnixMilli(ms))
	}
	if len(born) == 0 {
		return time.Time{}
	}
	slices.SortFunc(born, func(a, b time.Time) int { return b.Compare(a) }) // newest first
	return born[min(quorum, len(born))-1]
}

// ledgerBuilder turns a job's schedule, history and tick records into its
// ledger.
type ledgerBuilder struct {
	cfg       *config.Config
	job       *config.Job
	now       time.Time
	known     time.Time
	histFrom  time.Time // where the history's knowledge begins (history.Coverage)
	records   map[int64]tickRecord
	pausedNow *PauseNote        // the job's pause now, nil when it is not paused
	replicas  func() replicaSet // the roster, to tell a run whose worker is gone
	deployed  func() time.Time  // when the deployment's first replica started (zero: not known)
}

// build lists the scheduled ticks and the history's records of the window
// (recs), oldest first: one entry per scheduled tick, and one per manual
// run or run of a tick the schedule does not have.
func (b *ledgerBuilder) build(scheduled []time.Time, recs []jobs.RunRecord) []LedgerTick {
	byTick := map[int64][]jobs.RunRecord{}
	var out []LedgerTick
	for _, r := range recs {
		if r.Manual {
			out = append(out, b.fromRun(r))
			continue
		}
		byTick[r.Tick.UnixMilli()] = append(byTick[r.Tick.UnixMilli()], r)
	}
	for _, t := range scheduled {
		ms := t.UnixMilli()
		out = append(out, b.tick(t.UTC(), byTick[ms]))
		delete(byTick, ms)
	}
	for ms, rs := range byTick { // runs of ticks the schedule no longer has
		out = append(out, b.tick(time.UnixMilli(ms).UTC(), rs))
	}
	slices.SortStableFunc(out, func(a, b LedgerTick) int {
		if c := a.Tick.Compare(b.Tick); c != 0 {
			return c
		}
		switch {
		case a.Manual == b.Manual:
			return 0
		case b.Manual:
			return -1
		}
		return 1
	})
	if out == nil {
		out = []LedgerTick{}
	}
	return out
}

// tick is the entry of scheduled tick t, whose history records are recs.
func (b *ledgerBuilder) tick(t time.Time, recs []jobs.RunRecord) LedgerTick {
	var run, notRun *jobs.RunRecord
	for i := range recs {
		r := &recs[i]
		switch {
		case r.RunID == "":
			if notRun == nil || r.Ended.After(notRun.Ended) {
				notRun = r
			}
		case run == nil || lastEvent(*r).After(lastEvent(*run)):
			run = r
		}
	}
	switch {
	case run != nil:
		lt := b.fromRun(*run)
		if notRun != nil && (notRun.Status == jobs.StatusMissed || notRun.Status == jobs.StatusPaused) {
			// recorded not run, then run: a backfill or a catch-up ran it
			lt.Backfill = true
		}
		return lt
	}
	rec := b.records[t.UnixMilli()]
	if notRun != nil {
		lt := b.fromRun(*notRun)
		if (rec.done > 0 || rec.leased > 0) && (notRun.Status == jobs.StatusMissed || notRun.Status == jobs.StatusPaused) {
			// recorded not run, then claimed: a backfill or a catch-up
			// dispatched it, and no worker has started it yet
			lt.Outcome, lt.Backfill = OutcomeDispatched, true
			lt.Reason = "recorded " + string(notRun.Status) + ", then dispatched by a backfill or a catch-up; no run recorded yet"
			return lt
		}
		return b.withPause(lt)
	}
	lt := LedgerTick{Tick: t}
	switch {
	case rec.done > 0 && t.Before(b.histFrom) && b.histFrom.Before(b.now):
		// dispatched, and its run (if it ran) older than what the
		// history keeps (an empty history keeps nothing yet: pending)
		lt.Outcome, lt.Reason = OutcomeUnknown, fmt.Sprintf("dispatched; its run is older than what the history keeps (its newest %d runs)", b.cfg.HistoryRuns(b.job.Name))
	case rec.done > 0:
		lt.Outcome, lt.Reason = OutcomeDispatched, "dispatched; no run recorded yet"
	case rec.leased > 0:
		lt.Outcome, lt.Reason = OutcomeDispatching, "a replica holds its claim"
	case rec.paused > 0:
		lt.Outcome, lt.Reason = OutcomePaused, "recorded paused: the job was paused when a replica came to it"
	case rec.missed > 0 && b.now.Before(t.Add(b.job.StartingDeadline)):
		// not past its deadline: a catch-up claimed it as dropped, which
		// records it missed (scheduler.kindDrop)
		lt.Outcome, lt.Reason = OutcomeMissed, fmt.Sprintf("recorded missed within its starting deadline (%s): left out by the catch-up policy %s (after a restart, or lock masters or the queue unreachable)", b.job.StartingDeadline, b.job.Catchup)
	case rec.missed > 0:
		lt.Outcome, lt.Reason = OutcomeMissed, fmt.Sprintf("recorded missed: a replica came to it after its starting deadline (%s): replicas down or behind, or lock masters in their restart quarantine; or left out by the catch-up policy %s", b.job.StartingDeadline, b.job.Catchup)
	case t.After(b.now):
		lt.Outcome = OutcomeNotDue
	case t.Before(b.known):
		lt.Outcome, lt.Reason = OutcomeUnknown, "before what the history and the tick records keep"
	case b.now.Before(t.Add(b.job.StartingDeadline)):
		lt.Outcome = OutcomeDue
	case b.deployed != nil && !b.deployed().IsZero() && t.Before(b.deployed()):
		// no replica of the deployment ran yet: not missed by it
		lt.Outcome, lt.Reason = OutcomeUnknown, fmt.Sprintf("before the deployment's first replica started (%s): nothing could dispatch it", b.deployed().UTC().Format(time.RFC3339))
	default:
		lt.Outcome, lt.Reason = OutcomeMissed, fmt.Sprintf("no replica dispatched it within its starting deadline (%s)", b.job.StartingDeadline)
	}
	return b.withPause(lt)
}

// withPause adds the job's pause to a paused tick, and to a tick ahead
// while the job is paused: when the tick is within the pause, as far as
// the pause's start (within the clock skew bound) tells.
func (b *ledgerBuilder) withPause(lt LedgerTick) LedgerTick {
	p := b.pausedNow
	switch {
	case p == nil:
	case lt.Outcome != OutcomePaused && lt.Outcome != OutcomeNotDue && lt.Outcome != OutcomeDue:
	case p.At.IsZero() || !lt.Tick.Before(p.At.Add(-b.cfg.MaxClockSkew)):
		lt.Pause = p
	}
	return lt
}

// fromRun is the entry of history record r.
func (b *ledgerBuilder) fromRun(r jobs.RunRecord) LedgerTick {
	lt := LedgerTick{
		Tick: r.Tick.UTC(), Status: r.Status, Manual: r.Manual, Backfill: r.Backfill, RunID: r.RunID,
		Attempt: r.Attempt, Fence: r.Fence, ExitCode: r.ExitCode, HTTPStatus: r.HTTPStatus,
		Dispatcher: r.Dispatcher, Worker: r.Worker, Started: r.Started, Ended: r.Ended,
		Reason: r.Reason, Output: r.Output,
	}
	if !r.Started.IsZero() && !r.Ended.IsZero() {
		lt.DurationMS = r.Ended.Sub(r.Started).Milliseconds()
	}
	switch {
	case r.Status == jobs.StatusOK:
		lt.Outcome = OutcomeOK
	case r.Status.Failed():
		lt.Outcome = OutcomeFailed
	case r.Status == jobs.StatusRunning:
		lt.Outcome = OutcomeRunning
		if why := unknownWhy(b.job, r, b.now, b.replicas); why != "" {
			lt.Outcome, lt.Reason = OutcomeUnknown, why
		}
	case r.Status == jobs.StatusDispatched:
		lt.Outcome = OutcomeDispatched
	case r.Status == jobs.StatusSkipped, r.Status == jobs.StatusReplaced, r.Status == jobs.StatusDropped,
		r.Status == jobs.StatusMissed, r.Status == jobs.StatusPaused, r.Status == jobs.StatusRefused, r.Status == jobs.StatusStopped:
		lt.Outcome = Outcome(r.Status)
	default:
		lt.Outcome = OutcomeUnknown
	}
	return lt
}

// lastEvent is when the history last heard of run r.
func lastEvent(r jobs.RunRecord) time.Time {
	t := r.Enqueued
	for _, u := range []time.Time{r.Started, r.Ended} {
		if u.After(t) {
			t = u
		}
	}
	return t
}

// earliest is the earliest From of ls (the zero time for none).
func earliest(ls []*TickLedger) time.Time {
	var e time.Time
	for i, l := range ls {
		if i == 0 || l.From.Before(e) {
			e = l.From
		}
	}
	return e
}

// replicaSet is the roster as a run's reader sees it: which replica ran a
// run still recorded running, and whether it still lives.
type replicaSet struct {
	// every entry of each replica id: one per worker (a config reload runs
	// two workers of one id for a moment; the dead entry of a replica's
	// previous process stays listed beside its new one)
	byID map[string][]roster.Member
	ok   bool // the roster was read
}

// replicaSet reads the roster; a failed read tells nothing (every run
// recorded running stands).
func (c *Cluster) replicaSet(ctx context.Context) replicaSet {
	members, err := roster.Read(ctx, c.queue, c.cfg.Namespace)
	if err != nil {
		return replicaSet{}
	}
	rs := replicaSet{byID: make(map[string][]roster.Member, len(members)), ok: true}
	for _, m := range members {
		rs.byID[m.ID] = append(rs.byID[m.ID], m)
	}
	return rs
}

// gone tells whether run r, recorded running, lost its worker: no entry of
// the replica that runs it is live in the roster and began before the run
// (three heartbeats missed, roster.LiveWindow; not in it; or every live
// entry started after the run began: a new process). An entry whose start
// is unknown (older versions, before its second heartbeat) may be the
// run's. Its end will never be recorded by it: asynq retries its task once
// the task's lease runs out.
func (rs replicaSet) gone(r jobs.RunRecord) bool {
	if !rs.ok || r.Worker == "" || r.Started.IsZero() {
		return false
	}
	return !slices.ContainsFunc(rs.byID[r.Worker], func(m roster.Member) bool {
		return m.Live && (m.Started.IsZero() || !m.Started.After(r.Started))
	})
}

// unknownWhy says why run r, recorded running, has no end to come as a
// reader sees it at now (the queue Redis's clock; zero: not known): past
// its job j's timeout and a minute (j nil: not known), or its worker gone
// (replicas, the roster, read only when asked; nil: not known). "" while
// it may run. A reader's verdict, for what is shown (the ledger, baton
// history and status), never for what decides.
func unknownWhy(j *config.Job, r jobs.RunRecord, now time.Time, replicas func() replicaSet) string {
	switch {
	case j != nil && j.Timeout > 0 && !now.IsZero() && now.After(r.Started.Add(j.Timeout+time.Minute)):
		return fmt.Sprintf("no end recorded, and its timeout (%s) has passed: its worker may have died", j.Timeout)
	case replicas != nil && replicas().gone(r):
		return replicas().goneWhy(r)
	}
	return ""
}

// goneWhy says why run r is taken as gone (gone is true).
func (rs replicaSet) goneWhy(r jobs.RunRecord) string {
	ms := rs.byID[r.Worker]
	var seen, started time.Time // the last heartbeat; the earliest live start
	for _, m := range ms {
		if m.Seen.After(seen) {
			seen = m.Seen
		}
		if m.Live && (started.IsZero() || m.Started.Before(started)) {
			started = m.Started
		}
	}
	switch {
	case len(ms) == 0:
		return fmt.Sprintf("no end recorded, and its worker %s is no longer in the roster: the run died with it (asynq retries its task once the task's lease runs out)", redact.Quote(r.Worker))
	case started.IsZero():
		return fmt.Sprintf("no end recorded, and its worker %s stopped beating at %s: the run died with it (asynq retries its task once the task's lease runs out)", redact.Quote(r.Worker), seen.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("no end recorded, and its worker %s started again at %s, after the run began: the run died with the earlier process (asynq retries its task once the task's lease runs out)", redact.Quote(r.Worker), started.UTC().Format(time.RFC3339))
}

// deployedKey holds when the namespace's first replica started (unix ms,
// its clock): NS:deployed.
func deployedKey(ns string) string { return ns + ":deployed" }
