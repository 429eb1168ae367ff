package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/batonhq/baton/internal/quorum"
)

// claimed is a tick this replica's claim won, on its way to the dispatcher.
type claimed struct {
	idx    int   // index of the tick in its batch
	fence  int64 // dispatch fence: the largest counter the owning masters answered
	synced bool  // the fence is on a quorum of the masters' counters
	// the claim's span (tracing on; nil off): the dispatch's parent. A
	// pointer, so that tracing off widens a claimed tick by one word only
	span *trace.SpanContext
}

// claimResult is what the claim of a batch leaves to its caller, which
// routes it its own way: Run's loop claims the retries when they come due
// and the outage's probe the held ticks (runBatch); Backfill claims both
// again itself.
type claimResult struct {
	retry      []item       // to claim again, each at its fireAt (readied by retryAt)
	hold       []heldTick   // failing again: an outage of the masters or the queue
	dispatched []time.Time  // ticks the dispatcher took (Dispatch returned nil)
	notRun     []notRunTick // ticks recorded not run, and why
}

// heldTick is a tick an outage holds back, and the outage's cause.
type heldTick struct {
	it    item
	cause error
}

// notRunTick is a tick recorded not run, and why.
type notRunTick struct {
	at     time.Time
	reason string
}

// process claims a batch of ticks, dispatches the ones this replica owns,
// commits them, and records why the others that will not run did not. It
// returns the ticks to claim again and the ticks to hold back, for its
// caller to route.
func (s *Scheduler) process(ctx context.Context, batch []item) claimResult {
	var res claimResult
	batch = s.prepare(ctx, batch)
	if len(batch) == 0 {
		return res
	}
	claimedAt := s.opts.clock.Now()
	answers := s.claim(ctx, batch)

	now := s.opts.clock.Now()
	var owned []claimed
	var notRun []notDispatched
	var release []int // batch indices of the leases given up
	var unrecord []unrecorded
	var again []item
	// one back-off for every tick of the batch that failed, so they are
	// retried together, in one pipeline
	attempts := 0
	for _, it := range batch {
		attempts = max(attempts, int(it.attempts))
	}
	backoff := time.Duration(10+rand.IntN(40)) * time.Millisecond << min(attempts, 6)
	failures := 0
	var firstErr error
	for i, it := range batch {
		d := decide(it, s.answersTo(answers, i), now, backoff)
		batch[i].claim.missedOn = d.missedOn // set by prepare
		if d.err != nil {
			if firstErr == nil {
				firstErr = d.err
			}
			failures++
		}
		if d.release {
			release = append(release, i)
		}
		if d.unrecord != "" {
			unrecord = append(unrecord, unrecorded{i, d.unrecord})
		}
		switch d.kind {
		case decOwned:
			s.add(it.job, func(c *stats) { c.owned.Add(1) })
			owned = append(owned, claimed{idx: i, fence: d.fence, synced: d.synced})
			s.note("claimed", it)
		case decDone:
			s.add(it.job, func(c *stats) { c.done.Add(1) })
		case decNotRun:
			if d.counted {
				s.countNotRun(it, d)
			}
			notRun = append(notRun, notDispatched{i, d.paused, d.reason})
		case decHold:
			res.hold = append(res.hold, heldTick{it, d.err})
		case decRetry:
			s.add(it.job, func(c *stats) { c.busy.Add(1) })
			if d.early {
				s.add(it.job, func(c *stats) { c.early.Add(1) })
			}
			again = append(again, retryAt(it, d.at))
		}
	}
	owned, lost := s.raiseFences(ctx, batch, owned)
	if s.opts.tracer != nil {
		s.traceClaims(ctx, batch, owned, claimedAt)
	}
	for _, i := range lost {
		release = append(release, i)
		again = append(again, retryAt(batch[i], s.opts.clock.Now().Add(backoff)))
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
	if len(unrecord) > 0 {
		s.unrecord(context.WithoutCancel(ctx), batch, unrecord)
	}
	res.retry = again
	if len(owned) > 0 {
		s.dispatch(ctx, batch, owned, claimedAt, &res)
	}
	s.recordNotDispatched(ctx, batch, notRun)
	for _, n := range notRun {
		res.notRun = append(res.notRun, notRunTick{batch[n.idx].at, n.reason})
	}
	return res
}

// ownMissed returns missedOn (the masters on which earlier attempts of a
// claim recorded its tick "missed") with the masters this attempt recorded
// it on added, and marks the answers of the masters an earlier attempt
// recorded it on as this claim's own records (first). The claim that wrote
// the record on the first master answering is the one that logs and
// records the miss, also when the attempt that wrote it was not decided
// (it reached only some masters) and a retry of the same claim completes
// it: otherwise nobody would.
func ownMissed(as []answer, missedOn uint64) uint64 {
	for m := range min(len(as), 64) {
		a := &as[m]
		if a.err != nil || a.st != stMissed {
			continue
		}
		if a.first {
			missedOn |= 1 << m
		} else if missedOn&(1<<m) != 0 {
			a.first = true
		}
	}
	return missedOn
}

// notDispatched is a tick of a batch that was not dispatched: paused or
// missed, and why.
type notDispatched struct {
	idx    int // index in the batch
	paused bool
	reason string
}

// decisionKind is what a claim's decision leaves to do with its tick.
type decisionKind int

const (
	decOwned  decisionKind = iota // this claim owns the tick: dispatch it (fence, synced)
	decDone                       // decided already: nothing to do
	decLeased                     // left out by the catch-up policy and leased by another claim, which dispatches it
	decRetry                      // claim it again at the decision's at
	decHold                       // failing again (an outage): held back with err as the cause
	decNotRun                     // not run and never to be: record why (reason)
)

// decision is what the claim of one tick decided, from the masters'
// answers: what to do with the tick, and what to undo on the masters.
type decision struct {
	kind   decisionKind
	fence  int64     // decOwned: the dispatch fence
	synced bool      // decOwned: every owning master answered that fence
	at     time.Time // decRetry: when to claim it again
	early  bool      // decRetry: not due yet by a master's clock
	err    error     // decRetry, decHold: the masters failed (nil: busy, split or early)
	// the lease is held on some masters but the tick is not owned: give
	// it up before the tick is claimed again
	release bool
	// "missed" or "paused": this claim's own "done" records, written by a
	// commit that never reached a quorum, become this record
	unrecord string
	paused   bool   // decNotRun: paused, not missed
	reason   string // decNotRun: why the tick did not run
	// decNotRun: this replica counts and logs it (a pause; a miss recorded
	// by this claim, or that no majority could vouch for): once across
	// replicas
	counted bool
	// decNotRun, counted: why it was missed, for the log line
	why  missedWhy
	late time.Duration // decNotRun: how late the tick was (by a master's clock)
	// the masters on which an attempt of this claim recorded the tick
	// missed, this one's included (see ownMissed)
	missedOn uint64
}

// missedWhy says why a tick was missed.
type missedWhy int

const (
	missedPaused  missedWhy = iota // not missed: paused
	missedLate                     // past its starting deadline
	missedLeftOut                  // left out by the job's catch-up policy
	missedUnknown                  // no majority of masters could vouch it was not dispatched
)

// decide is what the claim of tick it decided from the masters' answers as
// (one per master), at now by this replica's clock; backoff is the batch's
// wait before a claim that split or failed is tried again. It reads no
// state and writes none: process carries the decision out.
func decide(it item, as []answer, now time.Time, backoff time.Duration) decision {
	as = slices.Clone(as)
	d := decision{missedOn: ownMissed(as, it.missedOn())}
	o := verdict(as)
	switch o.st {
	case stOwned:
		d.kind, d.fence, d.synced = decOwned, o.fence, o.agree
	case stDone:
		d.kind = decDone
	case stPaused:
		if o.mine {
			d.unrecord = "paused"
		}
		d.kind, d.paused, d.counted, d.reason = decNotRun, true, true, "the job is paused"
	case stMissed:
		d.kind, d.late = decNotRun, o.wait
		if o.mine {
			// this claim's own commit reached only some masters, and the
			// tick did not run: those records say so now; no other
			// replica records it (they find it done)
			d.unrecord = "missed"
		}
		switch {
		case o.unknown:
			d.release, d.counted, d.why = o.split, true, missedUnknown
			d.reason = "no majority of lock masters could vouch that it was not dispatched already"
		default:
			// another claim recorded it missed, and logs and counts it;
			// the record of why it did not run is written here too, as
			// that claim's replica may have died before it wrote it (the
			// recorder keeps one per tick)
			d.counted = o.mine || o.first
			d.why = missedLate
			if it.kind == kindDrop && o.wait <= it.job.StartingDeadline {
				d.why = missedLeftOut
			}
			d.reason = missedReason(it, o)
		}
	case stBusy:
		if it.kind == kindDrop && o.err == nil {
			d.kind = decLeased // leased by another replica, which dispatches it
			break
		}
		if o.err != nil && !o.early && it.attempts > 0 {
			// failing again: an outage; held back until the masters
			// answer, then claimed as the job's catch-up policy says
			d.kind, d.err = decHold, o.err
			break
		}
		d.kind, d.early, d.release = decRetry, o.early, o.split
		wait := o.wait
		if (o.err != nil || o.split) && !o.early {
			// split vote or masters failing: back off with jitter
			wait, d.err = backoff, o.err
		}
		// (not for a tick not due yet: the master's clock said when to
		// ask again, and this replica's clock is the one that is off)
		if last := it.at.Add(it.job.StartingDeadline + time.Second); !o.early && it.kind != kindBackfill && now.Add(wait).After(last) {
			wait = max(last.Sub(now), 0)
		}
		d.at = now.Add(wait + time.Millisecond)
	}
	if o.mine && d.kind == decNotRun {
		d.reason = "its commit before the run reached only some lock masters; " + d.reason
	}
	return d
}

// countNotRun counts and logs a tick the claim decided not to run (d).
func (s *Scheduler) countNotRun(it item, d decision) {
	log := s.opts.log.With("job", it.job.Name, "tick", it.at.Format(time.RFC3339), "replica", s.opts.replica)
	if d.paused {
		s.add(it.job, func(c *stats) { c.paused.Add(1) })
		log.Info("tick skipped: job paused")
		return
	}
	s.add(it.job, func(c *stats) { c.missed.Add(1) })
	switch d.why {
	case missedUnknown:
		log.Warn("tick missed: no majority of lock masters can grant it (some restarted after it was due and may have lost its record, or the job is paused on some of them); not dispatched, since none can vouch that it was not dispatched already")
	case missedLeftOut:
		log.Warn("tick missed: left out by the job's catch-up policy (after a restart, or lock masters or the queue unreachable)", "catchup", string(it.job.Catchup))
	default:
		log.Warn("tick missed: past its starting deadline", "late", d.late.Round(time.Millisecond), "starting_deadline", it.job.StartingDeadline)
	}
}

// missedReason says why tick it, decided MISSED (o) by a quorum that could
// vouch for it, did not run.
func missedReason(it item, o outcome) string {
	if it.kind == kindDrop && o.wait <= it.job.StartingDeadline {
		return "left out by the catch-up policy " + string(it.job.Catchup)
	}
	return fmt.Sprintf("past its starting deadline (%s late, deadline %s)", o.wait.Round(time.Millisecond), it.job.StartingDeadline)
}

// recordNotDispatched tells the dispatcher, if it keeps records
// (Recorder), of the ticks that were not dispatched.
func (s *Scheduler) recordNotDispatched(ctx context.Context, batch []item, nd []notDispatched) {
	r, ok := s.disp.(Recorder)
	if !ok {
		return
	}
	pauses := map[string]string{} // the paused jobs' reasons, read once a batch
	for _, n := range nd {
		it := batch[n.idx]
		reason := n.reason
		if n.paused {
			why, ok := pauses[it.job.Name]
			if !ok {
				why = s.pauseReason(ctx, it.job)
				pauses[it.job.Name] = why
			}
			reason = why
		}
		r.NotDispatched(ctx, Tick{Job: it.job.Name, At: it.at, Replica: s.opts.replica}, n.paused, reason)
	}
}

// prepare readies a batch for its claim: it sets the tick keys, drops the
// ticks skipDone finds decided, and gives the others their claim tokens.
func (s *Scheduler) prepare(ctx context.Context, batch []item) []item {
	for i := range batch {
		if batch[i].claim == nil {
			batch[i].claim = &claimState{key: s.keysOf(batch[i].job).tickKey(batch[i].at)}
		}
	}
	batch = s.skipDone(ctx, batch)
	for i := range batch {
		if batch[i].claim.token == "" {
			// kept across retries: a claim whose answer was lost is ours again
			batch[i].claim.token = randomToken()
		}
	}
	return batch
}

// skipDone drops the follower claims and retries whose tick is already
// decided, after one pipelined MGET of the tick key and its writer key per
// master: a plain command costs Redis a fraction of a claim script, and
// followers normally find the tick done. Any master holding the record means
// done, as in the claim, except a "done" written before the run: the item's
// own (its commit's answer was lost: that retry goes on to the claim, which
// answers MINE), or another claim's on fewer than a quorum of masters (its
// owner may have died before the commit reached a quorum, and then never ran
// the tick: the claim weighs it). "missed" counts only on a quorum, as in
// the claim: a claim that left the tick out (a catch-up policy) may have
// reached only some masters, and the others may still grant it. The others
// are claimed: a lease held elsewhere answers BUSY with its remaining ttl,
// which tells when to look again.
// recordsPerMGet is how many ticks' records (two keys each) one MGET reads.
const recordsPerMGet = 128

// readRecords reads the record and the writer of the ticks batch[check[k]]
// from one master: one MGET per recordsPerMGet ticks on a standalone Redis,
// one per tick on a Cluster (their keys lie in different slots). Answer k
// is nil when it could not be read.
func readRecords(ctx context.Context, rdb redis.UniversalClient, batch []item, check []int) [][]any {
	out := make([][]any, len(check))
	per := recordsPerMGet
	if _, cluster := rdb.(*redis.ClusterClient); cluster {
		per = 1
	}
	pipe := rdb.Pipeline()
	var cmds []*redis.SliceCmd
	for lo := 0; lo < len(check); lo += per {
		hi := min(lo+per, len(check))
		keys := make([]string, 0, 2*(hi-lo))
		for _, i := range check[lo:hi] {
			keys = append(keys, batch[i].key(), writerKey(batch[i].key()))
		}
		cmds = append(cmds, pipe.MGet(ctx, keys...))
	}
	_, _ = pipe.Exec(ctx)
	for c, cmd := range cmds {
		vs, err := cmd.Result()
		lo := c * per
		n := min(per, len(check)-lo)
		if err != nil || len(vs) != 2*n {
			continue
		}
		for k := range n {
			out[lo+k] = vs[2*k : 2*k+2]
		}
	}
	return out
}

func (s *Scheduler) skipDone(ctx context.Context, batch []item) []item {
	var check []int
	for i, it := range batch {
		if it.kind.follower() { // a follower's first claim, or any retry
			check = append(check, i)
		}
	}
	if len(check) == 0 {
		return batch
	}
	done := make([]bool, len(batch))
	doneBy := make([]int, len(batch)) // masters holding another claim's "done" before its run
	missed := make([]int, len(batch)) // masters holding "missed"
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, rdb := range s.masters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, s.opts.timeout+time.Duration(len(check))*5*time.Microsecond)
			defer cancel()
			records := readRecords(cctx, rdb, batch, check)
			mu.Lock()
			defer mu.Unlock()
			for k, i := range check {
				vs := records[k]
				if vs == nil {
					continue
				}
				v, _ := vs[0].(string)
				by, _ := vs[1].(string)
				switch {
				case v == "done" && writtenBy(by, batch[i].token()):
					// this claim's own commit
				case v == "done" && by != "" && batch[i].kind != kindBackfill:
					doneBy[i]++
				case v == "done":
					done[i] = true
				case v == "missed" && batch[i].kind != kindBackfill:
					missed[i]++
				}
			}
		}()
	}
	wg.Wait()
	out := batch[:0]
	for i, it := range batch {
		if done[i] || doneBy[i] >= s.quorum || missed[i] >= s.quorum {
			s.add(it.job, func(c *stats) { c.done.Add(1) })
			continue
		}
		out = append(out, it)
	}
	return out
}

// claim runs the claim script for every tick of the batch on every master
// and returns the answers, by master and then by tick.
func (s *Scheduler) claim(ctx context.Context, batch []item) [][]answer {
	mode := s.g.Mode()
	return s.pipeline(ctx, len(batch), claimScript, func(i int) ([]string, []any) {
		it := batch[i]
		k := s.keysOf(it.job)
		keys := []string{it.key(), k.paused(), k.mark(), k.fence(), writerKey(it.key())}
		if mode != "u" {
			keys = append(keys, s.g.MarkerKey())
		}
		paused := ""
		if it.job.Paused {
			paused = "1"
		}
		kind := ""
		switch it.kind {
		case kindDrop:
			kind = "drop"
		case kindBackfill:
			kind = "backfill"
		}
		return keys, []any{it.token(), it.at.UnixMilli(), it.job.StartingDeadline.Milliseconds(), s.opts.leaseTTL.Milliseconds(),
			s.recordTTL(it.job).Milliseconds(), mode, paused, s.opts.maxSkew.Milliseconds(), kind}
	})
}

// Claim answers, as the claim script returns them.
const (
	stOwned    = 0
	stDone     = 1
	stBusy     = 2
	stMissed   = 3
	stPaused   = 4
	stAbstain  = 5  // the master restarted after the tick was due (may have lost its record)
	stEarly    = 6  // not yet due by the master's clock (beyond the skew bound)
	stMine     = 7  // recorded done by this claim's own commit, whose answer was lost
	stDoneBy   = 8  // recorded done before its run by another claim (a quorum of these is DONE)
	stUnmarked = -1 // the master's marker went missing: it grants nothing
)

// answer is one master's answer to one claim.
type answer struct {
	st    int64
	val   int64
	first bool // MISSED: this claim recorded the tick as missed
	err   error
}

// answersTo gathers every master's answer to claim i of a batch. A master
// whose marker went missing is invalidated: checked (and repaired) on the
// next call.
func (s *Scheduler) answersTo(answers [][]answer, i int) []answer {
	per := make([]answer, len(s.masters))
	for m := range s.masters {
		per[m] = answers[m][i]
		if per[m].st == stUnmarked && per[m].err == nil {
			s.g.Masters()[m].Invalidate()
		}
	}
	return per
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
	// some master holds this claim's own "done" (a commit whose answer was
	// lost): OWNED counts it with the masters granting the lease; any other
	// verdict means that commit never reached a quorum, and the tick did not
	// run
	mine bool
	err  error
}

// verdict tallies the masters' answers to one claim (one per master, in
// the masters' order) into the quorum's verdict: a majority of them.
func verdict(as []answer) outcome {
	q := len(as)/2 + 1
	var owned, mine, doneBy, missed, paused, busy, errs, abstain, early int
	var o outcome
	answered := false // some master answered: the first one decides o.first
	var low int64
	var errList, corrupt []error
	for _, a := range as {
		if a.err != nil {
			errs++
			errList = append(errList, a.err)
			if errors.Is(a.err, quorum.ErrCorrupt) {
				corrupt = append(corrupt, a.err)
			}
			continue
		}
		if !answered {
			answered, o.first = true, a.first
		}
		switch a.st {
		case stDone:
			return outcome{st: stDone}
		case stDoneBy:
			doneBy++
		case stOwned, stMine:
			if a.st == stMine {
				mine++
			} else {
				owned++
			}
			if owned+mine == 1 {
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
	o.mine = mine > 0
	switch {
	case len(corrupt) > 0:
		// a master that answered holds a mark or fencing counter that is no
		// number below 2^53: its fence is unknown, so the largest over the
		// masters is too. Nothing is dispatched on it (what was owned is
		// released) until an operator repairs the key the error names
		o.st, o.split = stBusy, owned > 0
		o.err = fmt.Errorf("scheduler: tick not claimed: %w", errors.Join(corrupt...))
	case early > 0:
		// some master's clock says the tick is not due: this replica's
		// clock is ahead; ask again when it is (releasing what was owned)
		o.st, o.split, o.early = stBusy, owned > 0, true
	case doneBy >= q:
		// another claim's commit reached a quorum: its run started
		o.st = stDone
	case owned+mine >= q:
		// (a master holding this claim's own record counts as granting it:
		// the commit is completed on the others before the run.) Another
		// claim's "done" on the rest never reached a quorum, or a master
		// granting now would hold it (one that lost it by a restart
		// abstains): that claim's owner never ran the tick, and died or
		// gave it up
		o.st, o.agree = stOwned, low == o.fence
	case paused >= q:
		o.st = stPaused
	case missed >= q:
		o.st = stMissed
	case abstain+paused > len(as)-q, busy == 0 && abstain+paused+doneBy > len(as)-q:
		// (another claim's "done" on some masters: with no lease left
		// that could complete it, the masters that restarted may have held
		// it on a quorum, so it may have run)
		o.st, o.unknown, o.split = stMissed, true, owned > 0
	case busy > 0:
		o.st, o.split = stBusy, owned > 0
	default:
		o.st, o.split = stBusy, owned > 0
		o.err = fmt.Errorf("scheduler: no quorum (%d of %d masters agreed): %w", owned, q, errors.Join(errList...))
	}
	return o
}

// raiseFences writes the fence of each owned tick not synced (its owning
// masters answered different counters) to every master's counter, never
// lowering it. A fence that reaches a quorum stays above every later one;
// the ticks whose fence did not are dropped from owned and their batch
// indices returned as lost, to be released and claimed again.
func (s *Scheduler) raiseFences(ctx context.Context, batch []item, owned []claimed) (kept []claimed, lost []int) {
	var raise []*claimed
	for i := range owned {
		if !owned[i].synced {
			raise = append(raise, &owned[i])
		}
	}
	if len(raise) == 0 {
		return owned, nil
	}
	answers := s.pipeline(context.WithoutCancel(ctx), len(raise), raiseScript, func(k int) ([]string, []any) {
		return []string{s.keysOf(batch[raise[k].idx].job).fence(), s.g.MarkerKey() + quorum.ForgottenSuffix}, []any{raise[k].fence}
	})
	for k, c := range raise {
		c.synced = s.onQuorum(answers, k, func(answer) bool { return true })
	}
	kept = make([]claimed, 0, len(owned))
	for _, c := range owned {
		if !c.synced {
			lost = append(lost, c.idx)
			continue
		}
		kept = append(kept, c)
	}
	if len(lost) > 0 {
		s.opts.log.Warn("dispatch fences not written to a majority; retrying those ticks", "ticks", len(lost), "replica", s.opts.replica)
	}
	return kept, lost
}

// extendLeases extends the leases of the owned ticks still waiting for a
// dispatch slot and returns the ones extended on a quorum of masters. The
// others (taken over by another replica after our lease expired, or already
// decided) are released and returned as retries (again), whose check finds
// them done, leased elsewhere or free to claim again.
func (s *Scheduler) extendLeases(ctx context.Context, batch []item, waiting []claimed) (kept []claimed, again []item) {
	// bounded by the master timeout, also when ctx ends meanwhile: a failed
	// extension would read as lost leases and leave them held
	ctx = context.WithoutCancel(ctx)
	answers := s.pipeline(ctx, len(waiting), extendScript, func(k int) ([]string, []any) {
		it := batch[waiting[k].idx]
		return []string{it.key()}, []any{it.token(), s.opts.leaseTTL.Milliseconds()}
	})
	extended := func(a answer) bool { return a.st == 1 }
	kept = make([]claimed, 0, len(waiting))
	var lost []int
	for k, c := range waiting {
		if !s.onQuorum(answers, k, extended) {
			lost = append(lost, c.idx)
			continue
		}
		kept = append(kept, c)
	}
	if len(lost) > 0 {
		s.opts.log.Warn("tick leases lost while waiting for a dispatch slot; checking them again", "ticks", len(lost), "replica", s.opts.replica)
		s.releaseLeases(ctx, batch, lost)
		for _, i := range lost {
			again = append(again, retryAt(batch[i], s.opts.clock.Now()))
		}
	}
	return kept, again
}

// unrecorded is a tick of a batch whose claim found its own "done" on some
// masters but was decided otherwise, and the record that replaces it; or a
// tick recorded before its run that the dispatcher left to another
// replica's job list, whose record is withdrawn.
type unrecorded struct {
	idx    int
	record string // "missed" or "paused"; "" withdraws the record
}

// unrecord replaces this claim's own "done" records of the ticks in u with
// the record of why they did not run (see lua/unrecord.lua).
func (s *Scheduler) unrecord(ctx context.Context, batch []item, u []unrecorded) {
	s.pipeline(ctx, len(u), unrecordScript, func(k int) ([]string, []any) {
		it := batch[u[k].idx]
		return []string{it.key(), writerKey(it.key())}, []any{it.token(), u[k].record}
	})
}

// releaseLeases gives up the leases of the batch's ticks at the indices
// idx, each only while it is still ours (see lua/release.lua).
func (s *Scheduler) releaseLeases(ctx context.Context, batch []item, idx []int) {
	for _, i := range idx {
		s.note("released", batch[i])
	}
	s.pipeline(ctx, len(idx), releaseScript, func(i int) ([]string, []any) {
		it := batch[idx[i]]
		return []string{it.key()}, []any{it.token()}
	})
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

// toAnswer reads one script's reply: a status, or a status and a value
// (and, from the claim, whether it recorded the tick missed first).
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

// notOnQuorum lists the items of a token-checked pipeline (n items) that
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
