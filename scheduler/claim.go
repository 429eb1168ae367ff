package scheduler

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/quorum"
)

var (
	//go:embed lua/claim.lua
	claimSrc string
	//go:embed lua/commit.lua
	commitSrc string
	//go:embed lua/release.lua
	releaseSrc string
	//go:embed lua/extend.lua
	extendSrc string
	//go:embed lua/raise.lua
	raiseSrc string
	//go:embed lua/commit_owned.lua
	commitOwnedSrc string

	// the claim grants and fences: it carries the quorum prelude (q_guard,
	// q_fence), shared with the lock acquire
	claimScript   = quorum.NewGuardedScript(claimSrc)
	commitScript  = quorum.NewScript(commitSrc)
	releaseScript = quorum.NewScript(releaseSrc)
	extendScript  = quorum.NewScript(extendSrc)
	raiseScript   = quorum.NewScript(raiseSrc)
	// commits before the dispatch, token-checked (jobs that commit first)
	commitOwnedScript = quorum.NewScript(commitOwnedSrc)
)

// Claim answers, as the claim script returns them.
const (
	stOwned    = 0
	stDone     = 1
	stBusy     = 2
	stMissed   = 3
	stPaused   = 4
	stAbstain  = 5  // the master restarted after the tick was due (may have lost its record)
	stEarly    = 6  // not yet due by the master's clock (beyond the skew bound)
	stUnmarked = -1 // the master's marker went missing: it grants nothing
)

// jobKeys are the keys of one job; all share its hash tag. A tick's own key
// (tickKey) is both the tick's lease (value: the owner's token) and its
// record ("done" or "paused"), so a claim reads one key and a commit
// overwrites it.
type jobKeys struct {
	prefix, paused, mark, fence string
	// counted + <mark ms>: which replica counted the ticks a catch-up from
	// that mark found missed (so they are logged and counted once)
	counted string
}

func newJobKeys(namespace, job string) jobKeys {
	base := namespace + ":{" + job + "}:"
	return jobKeys{prefix: base + "tick:", paused: base + "paused", mark: base + "mark", fence: base + "fence", counted: base + "counted:"}
}

// tickKey is the key of tick at of the job.
func (k jobKeys) tickKey(at time.Time) string {
	return k.prefix + strconv.FormatInt(at.UnixMilli(), 10)
}

// decided tells whether a tick key's value records the tick as decided.
// (A "paused" record is not decided on its own: pausing takes a quorum, see
// the claim.)
func decided(v string) bool { return v == "done" || v == "missed" }

// PauseKey is the Redis key whose presence pauses a job on every replica.
func PauseKey(namespace, job string) string { return newJobKeys(namespace, job).paused }

func (s *Scheduler) recordTTL(j *Job) time.Duration {
	return j.StartingDeadline + s.opts.leaseTTL + 2*s.opts.maxSkew + s.opts.recordMargin
}

// answer is one master's answer to one claim.
type answer struct {
	st    int64
	val   int64
	first bool // MISSED: this claim recorded the tick as missed
	err   error
}

// pipeline runs one script per item on every master, one pipelined round
// trip per master, all masters in parallel (see quorum.Group.Pipeline: a
// master that restarted answers every item with why, and is repaired).
func (s *Scheduler) pipeline(ctx context.Context, n int, script *quorum.Script, args func(i int) ([]string, []any)) [][]answer {
	replies := s.g.Pipeline(ctx, s.opts.timeout, script, n, args)
	out := make([][]answer, len(replies))
	for mi, rs := range replies {
		out[mi] = make([]answer, len(rs))
		for i, r := range rs {
			out[mi][i] = toAnswer(r.Val, r.Err)
		}
	}
	return out
}

func toAnswer(v any, err error) answer {
	if err != nil {
		return answer{err: err}
	}
	switch x := v.(type) {
	case []any:
		if len(x) == 2 || len(x) == 3 {
			a, _ := x[0].(int64)
			b, _ := x[1].(int64)
			an := answer{st: a, val: b}
			if len(x) == 3 {
				f, _ := x[2].(int64)
				an.first = f == 1
			}
			return an
		}
	case int64:
		return answer{st: x}
	}
	return answer{err: fmt.Errorf("scheduler: unexpected script answer %v", v)}
}

// outcome is the quorum's verdict on one claim.
type outcome struct {
	st    int64
	wait  time.Duration // BUSY: the lease's remaining ttl
	fence int64         // OWNED: the largest fence the owning masters answered
	agree bool          // OWNED: every owning master answered the same fence
	split bool          // OWNED on some masters, not on a quorum: release and retry
	// MISSED because too many masters restarted after the tick was due: no
	// majority can vouch that it was not dispatched, so it never will be
	unknown bool
	// MISSED: this claim recorded the miss on the first master that answered,
	// so this replica logs and counts it (once across replicas)
	first bool
	early bool // BUSY because the tick is not due yet by a master's clock
	err   error
}

func (s *Scheduler) decide(as []answer) outcome {
	var owned, missed, paused, busy, errs, abstain, early int
	var o outcome
	answered := false // some master answered: the first one decides o.first
	var low int64
	var errList []error
	for _, a := range as {
		if a.err != nil {
			errs++
			errList = append(errList, a.err)
			continue
		}
		if !answered {
			answered, o.first = true, a.first
		}
		switch a.st {
		case stDone:
			return outcome{st: stDone}
		case stOwned:
			owned++
			if owned == 1 {
				low = a.val
			}
			low = min(low, a.val)
			o.fence = max(o.fence, a.val)
		case stBusy:
			busy++
			o.wait = max(o.wait, time.Duration(a.val)*time.Millisecond)
		case stMissed:
			missed++
			o.wait = time.Duration(a.val) * time.Millisecond
		case stPaused:
			paused++
		case stAbstain:
			abstain++
		case stEarly:
			early++
			o.wait = max(o.wait, time.Duration(a.val)*time.Millisecond)
		case stUnmarked:
			errs++
			errList = append(errList, errors.New("master's marker missing (restarted or flushed)"))
		}
	}
	switch {
	case early > 0:
		// some master's clock says the tick is not due: this replica's
		// clock is ahead; ask again when it is (releasing what was owned)
		o.st, o.split, o.early = stBusy, owned > 0, true
	case owned >= s.quorum:
		o.st, o.agree = stOwned, low == o.fence
	case paused >= s.quorum:
		o.st = stPaused
	case missed >= s.quorum:
		o.st = stMissed
	case abstain+paused > len(as)-s.quorum:
		o.st, o.unknown, o.split = stMissed, true, owned > 0
	case busy > 0:
		o.st, o.split = stBusy, owned > 0
	default:
		o.st, o.split = stBusy, owned > 0
		o.err = fmt.Errorf("scheduler: no quorum (%d of %d masters agreed): %w", owned, s.quorum, errors.Join(errList...))
	}
	return o
}

// process claims a batch of ticks, dispatches the ones this replica owns,
// commits them, and reschedules the busy ones.
func (s *Scheduler) process(ctx context.Context, batch []item) {
	for i := range batch {
		if batch[i].key == "" {
			batch[i].key = batch[i].job.keys.tickKey(batch[i].at)
		}
	}
	batch = s.skipDone(ctx, batch)
	if len(batch) == 0 {
		return
	}
	for i := range batch {
		if batch[i].token == "" {
			// kept across retries: a claim whose answer was lost is ours again
			batch[i].token = randomToken()
		}
	}
	claimedAt := s.opts.clock.Now()
	mode := s.g.Mode()
	answers := s.pipeline(ctx, len(batch), claimScript, func(i int) ([]string, []any) {
		it := batch[i]
		k := &it.job.keys
		keys := []string{it.key, k.paused, k.mark, k.fence}
		if mode != "u" {
			keys = append(keys, s.g.MarkerKey())
		}
		paused := ""
		if it.job.Paused {
			paused = "1"
		}
		drop := ""
		if it.drop {
			drop = "1"
		}
		return keys, []any{it.token, it.at.UnixMilli(), it.job.StartingDeadline.Milliseconds(), s.opts.leaseTTL.Milliseconds(),
			s.recordTTL(it.job).Milliseconds(), mode, paused, s.opts.maxSkew.Milliseconds(), drop}
	})

	var owned []int
	var fences []int64
	var release []int
	var again []item
	var unsynced []int // positions in owned whose fence must be raised on a majority
	// one back-off for every tick of the batch that failed, so they are
	// retried together, in one pipeline
	attempts := 0
	for _, it := range batch {
		attempts = max(attempts, it.attempts)
	}
	backoff := time.Duration(10+rand.IntN(40)) * time.Millisecond << min(attempts, 6)
	failures := 0
	var firstErr error
	for i, it := range batch {
		per := make([]answer, len(s.masters))
		for m := range s.masters {
			per[m] = answers[m][i]
			if per[m].st == stUnmarked && per[m].err == nil {
				s.g.Masters()[m].Invalidate() // checked (and repaired) on the next call
			}
		}
		o := s.decide(per)
		log := func() *slog.Logger {
			return s.opts.log.With("job", it.job.Name, "tick", it.at.Format(time.RFC3339), "replica", s.opts.replica)
		}
		switch o.st {
		case stOwned:
			s.add(it.job, func(c *stats) { c.owned.Add(1) })
			if !o.agree {
				unsynced = append(unsynced, len(owned))
			}
			owned = append(owned, i)
			fences = append(fences, o.fence)
		case stDone:
			s.add(it.job, func(c *stats) { c.done.Add(1) })
		case stPaused:
			s.add(it.job, func(c *stats) { c.paused.Add(1) })
			log().Info("tick skipped: job paused")
		case stMissed:
			if !o.unknown && !o.first {
				break // another replica recorded it missed, and logged it
			}
			s.add(it.job, func(c *stats) { c.missed.Add(1) })
			if o.unknown {
				if o.split {
					release = append(release, i)
				}
				log().Warn("tick missed: no majority of lock masters can grant it (some restarted after it was due and may have lost its record, or the job is paused on some of them); not dispatched, since none can vouch that it was not dispatched already")
				break
			}
			if it.drop && o.wait <= it.job.StartingDeadline {
				log().Warn("tick missed: left out by the job's catch-up policy (after a restart, or lock masters or the queue unreachable)", "catchup", it.job.Catchup)
				break
			}
			log().Warn("tick missed: past its starting deadline", "late", o.wait.Round(time.Millisecond), "starting_deadline", it.job.StartingDeadline)
		case stBusy:
			if it.drop && o.err == nil {
				break // leased by another replica, which dispatches it
			}
			if o.err != nil && !o.early && it.attempts > 0 {
				// failing again: an outage; held back until the masters
				// answer, then claimed as the job's catch-up policy says
				if failures == 0 {
					firstErr = o.err
				}
				failures++
				s.hold(it)
				break
			}
			s.add(it.job, func(c *stats) { c.busy.Add(1) })
			if o.early {
				s.add(it.job, func(c *stats) { c.early.Add(1) })
			}
			if o.split {
				release = append(release, i)
			}
			wait := o.wait
			if (o.err != nil || o.split) && !o.early {
				// split vote or masters failing: back off with jitter
				wait = backoff
				if o.err != nil {
					failures++
					if firstErr == nil {
						firstErr = o.err
					}
				}
			}
			// (not for a tick not due yet: the master's clock said when to
			// ask again, and this replica's clock is the one that is off)
			if !o.early && s.opts.clock.Now().Add(wait).After(it.at.Add(it.job.StartingDeadline+time.Second)) {
				wait = max(it.at.Add(it.job.StartingDeadline+time.Second).Sub(s.opts.clock.Now()), 0)
			}
			again = append(again, retryAt(it, s.opts.clock.Now().Add(wait+time.Millisecond)))
		}
	}
	if len(unsynced) > 0 {
		var lost []int
		owned, fences, lost = s.raiseFences(ctx, batch, owned, fences, unsynced)
		for _, i := range lost {
			release = append(release, i)
			again = append(again, retryAt(batch[i], s.opts.clock.Now().Add(backoff)))
		}
	}
	if failures > 0 && s.opts.log.Enabled(ctx, slog.LevelDebug) {
		// warned once per outage (hold); each failing batch at debug level
		s.opts.log.Debug("claims failed", "ticks", failures, "err", firstErr, "attempt", attempts+1, "replica", s.opts.replica)
	}
	// leases given up are released before their ticks are retried, so a
	// retry's fresh claim (same token) cannot be undone by a late release
	if len(release) > 0 {
		s.releaseLeases(context.WithoutCancel(ctx), batch, release)
	}
	s.reschedule(ctx, again)
	if len(owned) > 0 {
		s.dispatch(ctx, batch, owned, fences, claimedAt)
	}
}

// raiseFences writes the fence of each owned tick at the given positions,
// whose owning masters answered different counters, to every master's
// counter (never lowering it). A fence that reaches a majority stays above
// every later one; the ticks where it did not are removed from owned and
// returned, to be released and claimed again.
func (s *Scheduler) raiseFences(ctx context.Context, batch []item, owned []int, fences []int64, pos []int) ([]int, []int64, []int) {
	answers := s.pipeline(context.WithoutCancel(ctx), len(pos), raiseScript, func(k int) ([]string, []any) {
		return []string{batch[owned[pos[k]]].job.keys.fence}, []any{fences[pos[k]]}
	})
	bad := map[int]bool{}
	for k, p := range pos {
		if !s.onQuorum(answers, k, func(a answer) bool { return true }) {
			bad[p] = true
		}
	}
	if len(bad) == 0 {
		return owned, fences, nil
	}
	keptI, keptF, lost := splitOwned(owned, fences, func(p int) bool { return bad[p] })
	s.opts.log.Warn("dispatch fences not written to a majority; retrying those ticks", "ticks", len(lost), "replica", s.opts.replica)
	return keptI, keptF, lost
}

// onQuorum tells whether item k of a pipeline's answers succeeded (no
// error, and ok) on a quorum of masters.
func (s *Scheduler) onQuorum(answers [][]answer, k int, ok func(answer) bool) bool {
	n := 0
	for m := range s.masters {
		if a := answers[m][k]; a.err == nil && ok(a) {
			n++
		}
	}
	return n >= s.quorum
}

// splitOwned removes from owned (and fences, position for position) the
// ticks at the positions lost says, returning the kept ones in new slices
// and the lost ones' batch indices.
func splitOwned(owned []int, fences []int64, lost func(pos int) bool) (keptI []int, keptF []int64, gone []int) {
	keptI, keptF = make([]int, 0, len(owned)), make([]int64, 0, len(owned))
	for p, i := range owned {
		if lost(p) {
			gone = append(gone, i)
			continue
		}
		keptI, keptF = append(keptI, i), append(keptF, fences[p])
	}
	return keptI, keptF, gone
}

// skipDone drops the follower claims and retries whose tick is already
// decided, after one pipelined GET of the tick key per master: a plain
// command costs Redis a fraction of a claim script, and followers normally
// find the tick done. Any master holding the record means done, as in the
// claim. The others are claimed: a lease held elsewhere answers BUSY with
// its remaining ttl, which tells when to look again.
func (s *Scheduler) skipDone(ctx context.Context, batch []item) []item {
	var check []int
	for i, it := range batch {
		if it.follower { // a follower's first claim, or any retry
			check = append(check, i)
		}
	}
	if len(check) == 0 {
		return batch
	}
	done := make([]bool, len(batch))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, rdb := range s.masters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, s.opts.timeout+time.Duration(len(check))*5*time.Microsecond)
			defer cancel()
			pipe := rdb.Pipeline()
			cmds := make([]*redis.StringCmd, len(check))
			for k, i := range check {
				cmds[k] = pipe.Get(cctx, batch[i].key)
			}
			_, _ = pipe.Exec(cctx)
			mu.Lock()
			defer mu.Unlock()
			for k, i := range check {
				if v, err := cmds[k].Result(); err == nil && decided(v) {
					done[i] = true
				}
			}
		}()
	}
	wg.Wait()
	out := batch[:0]
	for i, it := range batch {
		if done[i] {
			s.add(it.job, func(c *stats) { c.done.Add(1) })
			continue
		}
		out = append(out, it)
	}
	return out
}

// slot takes a dispatch slot. It returns false when ctx ended, or when the
// extension timer fired first; the first wait starts that timer, to fire at
// firstExtend.
func (s *Scheduler) slot(ctx context.Context, extend *Timer, firstExtend time.Time) bool {
	if ctx.Err() != nil {
		return false
	}
	select {
	case s.sem <- struct{}{}:
		return true
	default:
	}
	if *extend == nil {
		*extend = s.opts.clock.NewTimer(max(firstExtend.Sub(s.opts.clock.Now()), 0))
	}
	select {
	case s.sem <- struct{}{}:
		return true
	case <-(*extend).C():
		return false
	case <-ctx.Done():
		return false
	}
}

// extendLeases extends the leases of the owned ticks from position n on,
// which still wait for a dispatch slot. The ones not extended on a quorum
// of masters (taken over by another replica after our lease expired, or
// already decided) are dropped from owned and go back as retries, whose
// check finds them done, leased elsewhere or free to claim again.
func (s *Scheduler) extendLeases(ctx context.Context, batch []item, owned []int, fences []int64, n int) ([]int, []int64) {
	// bounded by the master timeout, also when ctx ends meanwhile: a failed
	// extension would read as lost leases and leave them held
	ctx = context.WithoutCancel(ctx)
	wait := owned[n:]
	answers := s.pipeline(ctx, len(wait), extendScript, func(k int) ([]string, []any) {
		it := batch[wait[k]]
		return []string{it.key}, []any{it.token, s.opts.leaseTTL.Milliseconds()}
	})
	extended := func(a answer) bool { return a.st == 1 }
	keptI, keptF, lost := splitOwned(owned, fences, func(p int) bool {
		return p >= n && !s.onQuorum(answers, p-n, extended)
	})
	if len(lost) > 0 {
		s.opts.log.Warn("tick leases lost while waiting for a dispatch slot; checking them again", "ticks", len(lost), "replica", s.opts.replica)
		s.releaseLeases(ctx, batch, lost)
		again := make([]item, 0, len(lost))
		for _, i := range lost {
			again = append(again, retryAt(batch[i], s.opts.clock.Now()))
		}
		s.reschedule(ctx, again)
	}
	return keptI, keptF
}

// notOnQuorum counts the items of a token-checked pipeline (n items) that
// did not answer 1 on a quorum of masters.
func (s *Scheduler) notOnQuorum(answers [][]answer, n int) []int {
	var bad []int
	for k := range n {
		if !s.onQuorum(answers, k, func(a answer) bool { return a.st == 1 }) {
			bad = append(bad, k)
		}
	}
	return bad
}

// errNotRecorded: a CommitFirst tick could not be recorded on a quorum
// before its dispatch (its lease lost, or masters failing): it is not
// dispatched.
var errNotRecorded = errors.New("scheduler: tick not recorded before its run")

// commitOwned records a CommitFirst tick as dispatched, with a check that
// its lease is still ours, and reports whether a quorum did. Bounded by the
// master timeout, also at shutdown (a tick recorded but not run is lost).
func (s *Scheduler) commitOwned(ctx context.Context, it item) bool {
	answers := s.pipeline(context.WithoutCancel(ctx), 1, commitOwnedScript, func(int) ([]string, []any) {
		return []string{it.key, it.job.keys.mark}, []any{it.token, it.at.UnixMilli(), s.recordTTL(it.job).Milliseconds()}
	})
	return s.onQuorum(answers, 0, func(a answer) bool { return a.st == 1 })
}

func (s *Scheduler) releaseLeases(ctx context.Context, batch []item, idx []int) {
	s.pipeline(ctx, len(idx), releaseScript, func(i int) ([]string, []any) {
		it := batch[idx[i]]
		return []string{it.key}, []any{it.token}
	})
}

// dispatch hands the owned ticks to the dispatcher, at most the scheduler's
// parallelism at a time, and commits the dispatched ones in pipelined chunks
// as they complete, so a big instant's first ticks are recorded done while
// its last ones are still being enqueued.
func (s *Scheduler) dispatch(ctx context.Context, batch []item, owned []int, fences []int64, claimedAt time.Time) {
	type result struct {
		i         int
		err       error
		committed bool // recorded before the dispatch (CommitFirst)
	}
	results := make(chan result, len(owned))
	go func() {
		var wg sync.WaitGroup
		defer func() { wg.Wait(); close(results) }()
		owned, fences := owned, fences
		// ticks left waiting for a dispatch slot have their leases extended
		// every third of the lease ttl, counted from the claim (the timer
		// starts with the first wait)
		var extend Timer
		firstExtend := claimedAt.Add(s.opts.leaseTTL / 3)
		defer func() {
			if extend != nil {
				extend.Stop()
			}
		}()
		for n := 0; n < len(owned); n++ {
			i := owned[n]
			it := batch[i]
			if !s.slot(ctx, &extend, firstExtend) {
				if ctx.Err() != nil {
					// shutting down: the remaining ticks are released, not dispatched
					results <- result{i: i, err: ctx.Err()}
					continue
				}
				owned, fences = s.extendLeases(ctx, batch, owned, fences, n)
				extend.Reset(s.opts.leaseTTL / 3)
				n--
				continue
			}
			tick := Tick{Job: it.job.Name, At: it.at, RunID: randomToken(), Fence: fences[n], Replica: s.opts.replica}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-s.sem }()
				if it.job.CommitFirst {
					if ctx.Err() != nil {
						results <- result{i: i, err: ctx.Err()} // shutting down: released, not run
						return
					}
					if !s.commitOwned(ctx, it) {
						results <- result{i: i, err: errNotRecorded}
						return
					}
					dctx, cancel := context.WithTimeout(ctx, s.opts.leaseTTL)
					defer cancel()
					results <- result{i: i, err: s.disp.Dispatch(dctx, tick), committed: true}
					return
				}
				dctx, cancel := context.WithTimeout(ctx, s.opts.leaseTTL)
				defer cancel()
				results <- result{i: i, err: s.disp.Dispatch(dctx, tick)}
			}()
		}
	}()

	var commit, failed []int
	// commits and releases go out even when ctx ended (shutdown): each
	// pipeline is bounded by the master timeout
	wctx := context.WithoutCancel(ctx)
	flush := func() {
		if len(commit) > 0 {
			c := commit
			answers := s.pipeline(wctx, len(c), commitScript, func(k int) ([]string, []any) {
				it := batch[c[k]]
				return []string{it.key, it.job.keys.mark}, []any{it.at.UnixMilli(), s.recordTTL(it.job).Milliseconds()}
			})
			if bad := s.notOnQuorum(answers, len(c)); len(bad) > 0 {
				// the runs are in the queue (its task IDs dedupe them); the
				// records are what lets followers skip the ticks
				for _, k := range bad {
					s.add(batch[c[k]].job, func(c *stats) { c.commitErrors.Add(1) })
				}
				n := len(bad)
				s.opts.log.Warn("dispatched ticks not recorded on a majority of lock masters; followers will find them enqueued", "ticks", n, "replica", s.opts.replica)
			}
			commit = nil
		}
		if len(failed) > 0 {
			s.releaseLeases(wctx, batch, failed)
			// back off harder each time: a queue that is slow to answer
			// must not be answered with more work
			again := make([]item, 0, len(failed))
			for _, i := range failed {
				it := batch[i]
				if it.attempts > 0 && ctx.Err() == nil {
					// the queue failing again: an outage; held back until
					// it answers, then claimed as the catch-up policy says
					s.hold(it)
					continue
				}
				wait := time.Duration(100+rand.IntN(200)) * time.Millisecond << min(it.attempts, 5)
				again = append(again, retryAt(it, s.opts.clock.Now().Add(wait)))
			}
			s.reschedule(ctx, again)
			failed = nil
		}
	}
	handle := func(r result) {
		it := batch[r.i]
		if errors.Is(r.err, ErrAlreadyDispatched) {
			r.err = nil // dispatched earlier (by an owner that died before committing): done
		}
		if r.committed {
			// recorded before the dispatch: nothing to commit, nothing to undo
			if r.err != nil {
				s.add(it.job, func(c *stats) { c.dispatchErrors.Add(1) })
				s.opts.log.Error("tick recorded but its run did not start; it is not retried (it may have started)", "job", it.job.Name,
					"tick", it.at.Format(time.RFC3339), "replica", s.opts.replica, "err", r.err)
				return
			}
			s.add(it.job, func(c *stats) { c.dispatched.Add(1) })
			return
		}
		if errors.Is(r.err, errNotRecorded) {
			s.add(it.job, func(c *stats) { c.commitErrors.Add(1) })
			s.opts.log.Warn("tick not recorded on a majority of lock masters before its run: not run, released to be claimed again", "job", it.job.Name,
				"tick", it.at.Format(time.RFC3339), "replica", s.opts.replica)
			failed = append(failed, r.i)
			return
		}
		if r.err != nil && ctx.Err() != nil {
			failed = append(failed, r.i) // cut short by shutdown: release, no error
			return
		}
		if r.err != nil {
			s.add(it.job, func(c *stats) { c.dispatchErrors.Add(1) })
			s.opts.log.Error("dispatch failed; the tick is released for another try", "job", it.job.Name,
				"tick", it.at.Format(time.RFC3339), "replica", s.opts.replica, "err", r.err)
			failed = append(failed, r.i)
			return
		}
		s.add(it.job, func(c *stats) { c.dispatched.Add(1) })
		commit = append(commit, r.i)
	}
	// commit whenever the results pause, and at least every 256 of them
	for {
		select {
		case r, ok := <-results:
			if !ok {
				flush()
				return
			}
			handle(r)
			if len(commit)+len(failed) >= 256 {
				flush()
			}
		default:
			flush()
			r, ok := <-results
			if !ok {
				return
			}
			handle(r)
		}
	}
}
