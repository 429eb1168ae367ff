package scheduler

import (
	"container/heap"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/batonhq/baton/internal/clock"
	"github.com/batonhq/baton/internal/quorum"
	"github.com/batonhq/baton/internal/tracing"
	"github.com/batonhq/baton/locking"
)

// Job is what the scheduler knows of a job.
type Job struct {
	Name     string   // the job's name: its ticks' identity and its keys' hash tag
	Schedule Schedule // when its ticks are due
	// StartingDeadline: a tick not dispatched within this of its due time
	// (by Redis TIME) is missed. Must be > 0.
	StartingDeadline time.Duration
	Catchup          Catchup // CatchupSkip, CatchupLatest (default) or CatchupAll
	CatchupMax       int     // cap for CatchupAll; default 10
	// Jitter delays every fire by a stable per-job offset in [0, Jitter);
	// the tick's identity stays its due time.
	Jitter time.Duration
	Paused bool // paused in the configuration (a Redis flag can pause it too)
	// LeaderOnly: only the replica that currently leads the cluster (see
	// WithLeader) claims this job's ticks, so a Go program can keep
	// in-memory state between runs. While no replica leads (after the
	// leader died, until a standby is elected) its ticks are not claimed.
	LeaderOnly bool
	// CommitFirst: the tick is recorded as dispatched, with a check that the
	// lease is still this replica's, before Dispatch is called, and a tick
	// that cannot be recorded on a quorum is not dispatched (it goes back to
	// the claim). For runs that start in-process (baton's local mode), which
	// nothing else dedupes: a replica that loses its link to Redis after
	// starting one never lets another replica run it again. The price: a
	// dispatch that fails after the commit is not retried.
	CommitFirst bool
	// Since is when this definition of the job was made (a runtime
	// schedule's put instant): a job Put while Run runs claims its ticks
	// from Since on (see Put). Zero: from when it is put.
	Since time.Time
	// StatsGroup, when set, names the counters this job shares with the
	// other jobs of the group: JobStats reports them once, under the
	// group's name (baton's runtime schedules count together, as their
	// metrics do, rather than 96 bytes of counters each).
	StatsGroup string

	ctr *stats // its counters, set by New
}

// Option configures a Scheduler.
type Option func(*options)

type options struct {
	clock          Clock
	log            *slog.Logger
	replica        string
	namespace      string
	leaseTTL       time.Duration
	maxSkew        time.Duration
	followerDelay  time.Duration
	recordMargin   time.Duration
	timeout        time.Duration
	parallel       int
	claimsInFlight int // chunks claimed and in dispatch at once (claimsInFlight)
	leader         func() bool
	onDispatch     func(job string, lag time.Duration)
	tracer         trace.Tracer                                           // nil: tracing off
	observe        func(kind, job string, tick time.Time, replica string) // tests' history (export_test.go)
}

// note tells the test observer, if any, what became of a tick: "claimed",
// "committed" or "released".
func (s *Scheduler) note(kind string, it item) {
	if s.opts.observe != nil {
		s.opts.observe(kind, it.job.Name, it.at, s.opts.replica)
	}
}

// WithClock injects the clock (baton's tests use a fake one). Default: the real one.
func WithClock(c Clock) Option { return func(o *options) { o.clock = c } }

// WithLogger sets the logger. Default: discard.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithReplica names this replica in logs, ticks and the membership set.
// Default: a random id.
func WithReplica(id string) Option { return func(o *options) { o.replica = id } }

// WithNamespace sets the prefix of every key the scheduler keeps. Default "baton".
func WithNamespace(ns string) Option { return func(o *options) { o.namespace = ns } }

// WithTickLeaseTTL sets how long a claimed tick stays reserved for its owner
// before another replica may take it over. Default 5s.
func WithTickLeaseTTL(d time.Duration) Option { return func(o *options) { o.leaseTTL = d } }

// WithMaxClockSkew sets how far this replica's clock may be from Redis TIME
// before it stops claiming. Default 500ms.
func WithMaxClockSkew(d time.Duration) Option { return func(o *options) { o.maxSkew = d } }

// WithDispatchObserver calls f after each tick this replica dispatched,
// with its dispatch lag: the time from the tick's due instant to the
// dispatch's return, by the scheduler's clock (metrics). f must not block.
// Default: none.
func WithDispatchObserver(f func(job string, lag time.Duration)) Option {
	return func(o *options) { o.onDispatch = f }
}

// WithTracerProvider traces each tick this replica claims with tp's
// tracer: a "baton.claim" span for a claim that won the tick (the root of
// the tick's trace) and a "baton.dispatch" span, its child, around the
// Dispatch call, whose ctx carries it (a Dispatcher hands it on to the
// run). Claims that lose the race record nothing. Default (and nil): no
// tracing, at no cost.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) { o.tracer = tracing.Tracer(tp) }
}

// WithFollowerDelay sets how long the replicas that are not a tick's
// preferred claimer wait before claiming it themselves (they normally find it
// done). Default 500ms; instants with thousands of ticks due add 100ms per
// thousand.
func WithFollowerDelay(d time.Duration) Option { return func(o *options) { o.followerDelay = d } }

// WithRecordMargin sets how long a tick's record outlives its starting
// deadline plus the lease ttl and twice the skew bound. Default 1m.
func WithRecordMargin(d time.Duration) Option { return func(o *options) { o.recordMargin = d } }

// WithMasterTimeout bounds one pipelined round trip to one master. Default 2s.
func WithMasterTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// WithLeader tells the scheduler whether this replica leads the cluster now;
// only then does it claim the ticks of LeaderOnly jobs. Default: never.
func WithLeader(leading func() bool) Option { return func(o *options) { o.leader = leading } }

// WithDispatchParallelism caps concurrent Dispatch calls. Default 16: one
// Redis serialises enqueues anyway, and more calls than the dispatcher's
// connection pool (go-redis: 10 per CPU) only wait for a connection and time
// out under load.
func WithDispatchParallelism(n int) Option { return func(o *options) { o.parallel = n } }

// Stats are counters since Start.
type Stats struct {
	Owned          int64 // claims this replica won
	Done           int64 // ticks found already decided
	Busy           int64 // claims to try again: leased elsewhere, not due yet, a split vote or masters failing
	Missed         int64 // ticks never to be dispatched: past their deadline, or left out by the catch-up policy
	Paused         int64 // ticks skipped because their job is paused
	Dispatched     int64 // ticks handed to the Dispatcher (or found dispatched already)
	DispatchErrors int64 // Dispatch calls that failed
	CaughtUp       int64 // missed ticks claimed at start, as the catch-up policy says
	SkewStops      int64 // times claiming stopped because the clock was off beyond the bound
	// Early counts claims refused because the tick was not due yet by a
	// lock master's clock (this replica's clock is ahead).
	Early int64
	// CommitErrors counts ticks not recorded on a quorum: before their
	// dispatch (CommitFirst jobs: not dispatched) or after it.
	CommitErrors int64
	// LeftToOthers counts ticks released unrecorded because another live
	// replica's job list takes them and this one's does not
	// (ErrLeftToOthers).
	LeftToOthers int64
	// Held is how many ticks are held back now because the lock masters or
	// the queue fail (a gauge; totals only).
	Held int64
}

type stats struct {
	owned, done, busy, missed, paused, dispatched, dispatchErrors, caughtUp, skewStops, early, commitErrors, leftToOthers atomic.Int64
}

// Scheduler claims and dispatches the ticks of a set of jobs. Any number of
// replicas run one each, over the same jobs and the same lock masters; every
// tick is dispatched once.
type Scheduler struct {
	g       *quorum.Group           // the lock masters: claims run through it
	masters []redis.UniversalClient // the same masters, for plain reads
	quorum  int
	locks   *locking.Client
	jobsMu  sync.RWMutex    // guards jobs, which Put and Remove change while Run runs
	jobs    map[string]*Job // by name; a job replaced by Put is a new *Job
	added   []*Job          // jobs Put while Run runs, for its loop to schedule
	wake    chan struct{}   // Put and Remove wake Run's loop
	disp    Dispatcher
	opts    options

	stats    stats
	groupsMu sync.Mutex
	groups   map[string]*stats // the counters of each StatsGroup
	skewBad  atomic.Bool
	skew     atomic.Int64 // the last measured clock skew, ns
	members  atomic.Pointer[membership]
	retry    chan []item
	sem      chan struct{} // bounds Dispatch calls in flight, across batches
	claiming *claimGate    // bounds the claimed chunks in flight (claimsInFlight)
	stopping chan struct{} // closed when Run stops firing: retries are dropped
	procs    sync.WaitGroup
	wg       sync.WaitGroup

	held heldTicks // ticks held back while masters or the queue fail

	running   atomic.Bool  // Run was called
	exhausted sync.Map     // job name -> true: the dispatcher said ErrJobDone (max_runs reached)
	queued    atomic.Int64 // entries in Run's queue at its loop's last turn
	stale     atomic.Int64 // entries of removed or replaced jobs left in Run's queue (compact)
}

// New returns a scheduler whose tick claims run on the lock client's masters
// (one is the ordinary case, several form a quorum), with the same restart
// checks, batching and quorum counting as its locks. It validates the jobs
// and contacts no server.
func New(locks *locking.Client, jobs []Job, d Dispatcher, opts ...Option) (*Scheduler, error) {
	o := options{
		clock: RealClock(), log: slog.New(slog.NewTextHandler(io.Discard, nil)), namespace: "baton",
		leaseTTL: 5 * time.Second, maxSkew: 500 * time.Millisecond, followerDelay: 500 * time.Millisecond,
		recordMargin: time.Minute, timeout: 2 * time.Second, parallel: 16, claimsInFlight: claimsInFlight,
	}
	for _, opt := range opts {
		opt(&o)
	}
	if o.replica == "" {
		o.replica = randomID()
	}
	var errs []error
	if locks == nil || d == nil {
		errs = append(errs, errors.New("scheduler: a lock client and a dispatcher are required"))
	}
	if o.leaseTTL < 100*time.Millisecond || o.maxSkew <= 0 || o.timeout <= 0 || o.parallel < 1 || o.followerDelay < 0 {
		errs = append(errs, fmt.Errorf("scheduler: bad options: tick lease ttl %v (min 100ms), max skew %v, master timeout %v, parallelism %d, follower delay %v", o.leaseTTL, o.maxSkew, o.timeout, o.parallel, o.followerDelay))
	}
	s := &Scheduler{locks: locks, disp: d, opts: o,
		jobs: map[string]*Job{}, wake: make(chan struct{}, 1), retry: make(chan []item, 64), sem: make(chan struct{}, max(o.parallel, 1)),
		claiming: newClaimGate(o.claimsInFlight),
		stopping: make(chan struct{})}
	for i := range jobs {
		if jobs[i].Name != "" && s.jobs[jobs[i].Name] != nil {
			errs = append(errs, fmt.Errorf("scheduler: job %q listed twice", jobs[i].Name))
			continue
		}
		j, err := s.prepareJob(jobs[i], i)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		s.jobs[j.Name] = j
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	s.g = quorum.Of(locks)
	s.quorum = s.g.Quorum()
	for _, m := range s.g.Masters() {
		s.masters = append(s.masters, m.RDB)
	}
	return s, nil
}

// Stats returns the counters, summed over the jobs.
func (s *Scheduler) Stats() Stats {
	st := s.stats.snapshot()
	s.held.mu.Lock()
	for _, l := range s.held.byJob {
		st.Held += int64(len(l))
	}
	s.held.mu.Unlock()
	return st
}

// JobStats returns the counters of each job, by name, and of each
// StatsGroup, by the group's name (SkewStops, which belongs to no job, is
// 0 in them).
func (s *Scheduler) JobStats() map[string]Stats {
	js := s.snapshot()
	out := make(map[string]Stats, len(js))
	for _, j := range js {
		if j.StatsGroup != "" {
			out[j.StatsGroup] = j.ctr.snapshot()
			continue
		}
		out[j.Name] = j.ctr.snapshot()
	}
	return out
}

func (c *stats) snapshot() Stats {
	return Stats{
		Owned: c.owned.Load(), Done: c.done.Load(), Busy: c.busy.Load(),
		Missed: c.missed.Load(), Paused: c.paused.Load(), Dispatched: c.dispatched.Load(),
		DispatchErrors: c.dispatchErrors.Load(), CaughtUp: c.caughtUp.Load(), SkewStops: c.skewStops.Load(),
		Early: c.early.Load(), CommitErrors: c.commitErrors.Load(), LeftToOthers: c.leftToOthers.Load(),
	}
}

// add counts with f on the totals and on job's counters (j nil: the totals
// only).
func (s *Scheduler) add(j *Job, f func(*stats)) {
	f(&s.stats)
	if j != nil && j.ctr != nil {
		f(j.ctr)
	}
}

// Replica returns this replica's id.
func (s *Scheduler) Replica() string { return s.opts.replica }

// itemKind is what kind of claim an item makes.
type itemKind uint8

const (
	// kindFirst: a tick coming due, claimed at once (this replica is its
	// preferred claimer).
	kindFirst itemKind = iota
	// kindNext: the job's regular entry: a kindFirst claim that schedules
	// the job's next tick when it fires.
	kindNext
	// kindFollower: a tick checked before it is claimed (skipDone): a
	// non-preferred claimer's, a retry, a catch-up's, a held one's.
	kindFollower
	// kindDrop: a follower's claim of a tick left out by the catch-up
	// policy: recorded missed unless decided or leased already.
	kindDrop
	// kindBackfill: a follower's claim made by Backfill: a missed or
	// paused record, or none, does not stand in its way.
	kindBackfill
)

// follower tells whether the tick is checked before it is claimed.
func (k itemKind) follower() bool { return k >= kindFollower }

// item is one claim to make: tick At of job, at the moment fireAt. A
// scheduler holds one per job between its ticks (a million of them at
// most): what only a claim under way needs is behind claim.
type item struct {
	job      *Job
	at       time.Time // the tick's due instant (identity)
	fireAt   time.Time
	claim    *claimState // nil until the tick's first claim (prepare)
	attempts int32
	kind     itemKind
}

// claimState is what the claim of one tick keeps across its attempts.
type claimState struct {
	token string // the claim's token, kept across retries of this tick
	key   string // the tick's key
	// the masters (bit i: master i) on which an attempt of this claim
	// recorded the tick "missed" (see ownMissed)
	missedOn uint64
}

// token is the claim's token, "" before its first claim.
func (it *item) token() string {
	if it.claim == nil {
		return ""
	}
	return it.claim.token
}

// key is the tick's key, "" before its first claim.
func (it *item) key() string {
	if it.claim == nil {
		return ""
	}
	return it.claim.key
}

// missedOn is the masters on which an attempt of this claim recorded the
// tick "missed".
func (it *item) missedOn() uint64 {
	if it.claim == nil {
		return 0
	}
	return it.claim.missedOn
}

type itemHeap []item

func (h itemHeap) Len() int           { return len(h) }
func (h itemHeap) Less(i, j int) bool { return h[i].fireAt.Before(h[j].fireAt) }
func (h itemHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *itemHeap) Push(x any)        { *h = append(*h, x.(item)) }
func (h *itemHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// Run schedules until ctx ends, then lets the claims in flight finish (each
// is committed, or its lease released; at most the tick lease ttl) and
// returns. Its walk: start the background loops (startLoops), queue every
// job's first tick and the catch-up (startTicks), then turn after turn wait
// for the next item to come due (waitTurn), route the ready ticks
// (routeReady) and claim them in chunks (claimChunks); at the end, shut
// down (shutDown). Shutdown order: stop firing new ticks and drop retries
// (another replica, or the next start's catch-up, takes them), wait for
// the claims and dispatches in flight, then stop the membership and clock
// checks.
func (s *Scheduler) Run(ctx context.Context) error {
	s.running.Store(true)
	work, stopWork, stopBg := s.startLoops(ctx)
	defer s.shutDown(stopWork, stopBg)

	h := s.startTicks(work)
	var ready, batch []item // reused turn after turn
	for s.waitTurn(ctx, h) {
		ready = popDue(h, s.opts.clock.Now(), ready[:0])
		batch = s.routeReady(h, ready, batch[:0])
		s.claimChunks(work, batch)
	}
	return nil
}

// startLoops readies the lock masters (a failure is logged: the claims
// keep trying), makes the first skew check (it finishes before anything is
// claimed), and starts the background loops: membership, skew and the
// held ticks' probe, under a context that stopBg ends. It returns the
// context the claims and dispatches run under (work), which stopWork ends;
// neither ends with ctx (shutDown ends them, in order).
func (s *Scheduler) startLoops(ctx context.Context) (work context.Context, stopWork, stopBg context.CancelFunc) {
	if err := s.locks.Prepare(ctx); err != nil {
		s.opts.log.Warn("lock masters not reachable at start; will keep trying", "err", err)
	}
	s.checkSkew(ctx)
	bg, stopBg := context.WithCancel(context.WithoutCancel(ctx))
	s.wg.Add(2)
	go s.membershipLoop(bg)
	go s.skewLoop(bg)
	work, stopWork = context.WithCancel(context.WithoutCancel(ctx))
	s.wg.Add(1)
	go s.heldLoop(bg)
	return work, stopWork, stopBg
}

// shutDown ends Run in the order Run's doc gives: stop firing (retries are
// dropped from here on), wait up to the tick lease ttl for the claims and
// dispatches in flight, cancel those still going (stopWork) and wait for
// them, then stop the background loops (stopBg) and wait for them.
func (s *Scheduler) shutDown(stopWork, stopBg context.CancelFunc) {
	close(s.stopping)
	drained := make(chan struct{})
	go func() { s.procs.Wait(); close(drained) }()
	t := time.NewTimer(s.opts.leaseTTL)
	select {
	case <-drained:
	case <-t.C:
		s.opts.log.Warn("claims still in flight at shutdown: cancelling them", "after", s.opts.leaseTTL)
	}
	t.Stop()
	stopWork()
	s.procs.Wait()
	stopBg()
	s.wg.Wait()
}

// startTicks returns Run's queue, a heap of items by fire time, holding
// each job's regular entry. Before that it reads every job's mark (one
// parallel round trip, before any claim) and starts the catch-up's
// listing from them, which runs beside the first claims and hands its
// items to the loop as retries.
func (s *Scheduler) startTicks(work context.Context) *itemHeap {
	now := s.opts.clock.Now()
	h := &itemHeap{}
	marks := s.readMarks(work)
	s.procs.Add(1)
	go func(start time.Time) {
		defer s.procs.Done()
		s.reschedule(work, s.catchUp(start, marks))
	}(now)
	for _, it := range s.startAll(now) {
		heap.Push(h, it)
	}
	return h
}

// waitTurn waits until the earliest item of h comes due, retries arrive
// (pushed to h), or Put or Remove changed the jobs (the added jobs'
// entries pushed to h, the stale ones compacted away). It returns false
// when ctx ended first.
func (s *Scheduler) waitTurn(ctx context.Context, h *itemHeap) bool {
	s.queued.Store(int64(h.Len()))
	var wait <-chan time.Time
	if h.Len() > 0 {
		timer := s.opts.clock.NewTimer((*h)[0].fireAt.Sub(s.opts.clock.Now()))
		defer timer.Stop()
		wait = timer.C()
	}
	select {
	case <-ctx.Done():
		return false
	case its := <-s.retry:
		for _, it := range its {
			heap.Push(h, it)
		}
	case <-s.wake:
		for _, it := range s.startAdded(s.opts.clock.Now()) {
			heap.Push(h, it)
		}
		s.compact(h)
	case <-wait:
	}
	return true
}

// popDue pops the items of h due at now, earliest first, appends them to
// ready and returns it.
func popDue(h *itemHeap, now time.Time, ready []item) []item {
	for h.Len() > 0 && !(*h)[0].fireAt.After(now) {
		ready = append(ready, heap.Pop(h).(item))
	}
	return ready
}

// routeReady decides what becomes of each ready item, appends the ones
// to claim now to batch and returns it. An item of a job removed,
// replaced (jobset.go) or exhausted is dropped. A job's regular entry
// pushes the job's next tick to h and becomes its tick's first claim. A
// LeaderOnly job's tick is claimed by the leader only. A first claim of a
// tick this replica is not the preferred claimer of goes back to h as a
// follower, after the follower delay (longer when many ticks come due at
// once).
func (s *Scheduler) routeReady(h *itemHeap, ready, batch []item) []item {
	delay := followerDelay(s.opts.followerDelay, countFresh(ready))
	for _, it := range ready {
		it, ok := s.current(it)
		if !ok {
			continue // its job was removed or replaced (jobset.go)
		}
		if s.isExhausted(it.job) {
			continue // done: no more claims, no next tick
		}
		if it.kind == kindNext {
			it.kind = kindFirst
			if t := it.job.Schedule.Next(it.at); !t.IsZero() {
				heap.Push(h, item{job: it.job, at: t.UTC(), fireAt: t.Add(Jitter(it.job.Name, it.job.Jitter)), kind: kindNext})
			}
		}
		if it.job.LeaderOnly {
			if s.opts.leader == nil || !s.opts.leader() {
				continue // not the leader: the leader claims it
			}
			batch = append(batch, it)
			continue
		}
		if !it.kind.follower() && !s.preferred(it) {
			it.kind = kindFollower
			it.fireAt = it.fireAt.Add(delay)
			heap.Push(h, it)
			continue
		}
		batch = append(batch, it)
	}
	return batch
}

// countFresh counts the ticks coming due now among ready: not retries or
// deferred ones.
func countFresh(ready []item) int {
	fresh := 0
	for _, it := range ready {
		if !it.kind.follower() {
			fresh++
		}
	}
	return fresh
}

// claimChunks claims batch, each chunk of up to claimChunk ticks in a
// goroutine of its own (claimOne), and returns at once; nothing while the
// clock skew is beyond the bound (checkSkew warned once when it went
// there). One pipelined claim per master for up to claimChunk ticks:
// bigger instants go out in chunks so the first dispatches need not wait
// for the whole instant's answers, and at most claimsInFlight chunks at
// once: a tick is claimed when its dispatch is near, not held (and its
// lease extended) while the chunks before it dispatch, and the other
// replicas claim what this one has not reached.
func (s *Scheduler) claimChunks(work context.Context, batch []item) {
	if len(batch) == 0 {
		return
	}
	if s.skewBad.Load() {
		s.opts.log.Debug("clock skew beyond the bound: not claiming", "ticks", len(batch), "replica", s.opts.replica)
		return
	}
	for len(batch) > 0 {
		n := min(len(batch), claimChunk)
		b := append([]item(nil), batch[:n]...)
		batch = batch[n:]
		s.procs.Add(1)
		go s.claimOne(work, b)
	}
}

// claimOne claims and dispatches one chunk (runBatch) once the claim gate
// gives it a slot, one of claimsInFlight (the waiting chunk with the
// earliest tick deadline first); the chunk's items of jobs removed or
// replaced while it waited are left out. A chunk still waiting when Run
// stops firing is not claimed: another replica, or the next start's
// catch-up, takes it. It is one of Run's procs.
func (s *Scheduler) claimOne(work context.Context, b []item) {
	defer s.procs.Done()
	if !s.claiming.acquire(earliestDeadline(b), s.stopping) {
		return // not claimed: another replica, or the next start's catch-up, takes them
	}
	defer s.claiming.release()
	// a chunk may have waited long: its jobs may have been removed or
	// replaced meanwhile (jobset.go)
	if b = s.stillCurrent(b); len(b) > 0 {
		s.runBatch(work, b)
	}
}

// claimChunk is the most ticks claimed in one pipeline: an instant of up to
// this many ticks is claimed in one round trip per master. claimsInFlight
// bounds the chunks a replica claims and dispatches at once: an instant of a
// million ticks, all claimed at once, held leases that had to be extended
// every ttl/3 while the dispatches crept through them, and the extensions
// starved the dispatches (on a 3-primary Cluster 1.6% of the instant was
// dispatched within its minute).
const (
	claimChunk     = 2500
	claimsInFlight = 2
)

// followerDelay is how long the replicas that are not a tick's preferred
// claimer wait before they check it themselves: the configured delay, plus
// 100ms per thousand ticks due at the same instant, because the preferred
// claimers need about that long to claim, dispatch and commit a large
// instant (one Redis runs its scripts one at a time). A follower that checked
// too early would find the tick's lease held, claim it in vain and come back
// when the lease ends, adding load where the instant is already slow.
func followerDelay(base time.Duration, due int) time.Duration {
	return base + time.Duration(due/1000)*100*time.Millisecond
}

// preferred tells whether this replica claims the tick first; the others
// claim after the follower delay and normally find it done.
func (s *Scheduler) preferred(it item) bool {
	m := s.members.Load()
	if m == nil || len(m.ids) <= 1 || m.self < 0 {
		return true
	}
	h := fnv.New32a()
	_, _ = io.WriteString(h, it.job.Name)
	_, _ = io.WriteString(h, it.at.Format(time.RFC3339))
	return int(h.Sum32()%uint32(len(m.ids))) == m.self
}

// retryAt readies an item to be claimed again at fireAt, on a 10ms grid so
// retries that come due together are claimed together.
func retryAt(it item, fireAt time.Time) item {
	it.fireAt = fireAt.Truncate(10 * time.Millisecond).Add(10 * time.Millisecond)
	if !it.kind.follower() {
		it.kind = kindFollower
	}
	it.attempts++
	return it
}

// markExhausted stops the claims of job's ticks: the dispatcher said
// ErrJobDone, the job reached its max_runs.
func (s *Scheduler) markExhausted(job *Job) {
	if _, was := s.exhausted.LoadOrStore(job.Name, true); !was {
		s.opts.log.Info("job done: the dispatcher takes no more of its ticks (max_runs reached); no more claims", "job", job.Name, "replica", s.opts.replica)
	}
}

// isExhausted tells whether job reached its max_runs (markExhausted).
func (s *Scheduler) isExhausted(job *Job) bool {
	_, ok := s.exhausted.Load(job.Name)
	return ok
}

// runBatch claims a batch for Run's loop and routes what the claim leaves:
// the ticks to claim again back to the loop, the ticks an outage holds
// back to the outage's probe (heldLoop).
func (s *Scheduler) runBatch(ctx context.Context, batch []item) {
	res := s.process(ctx, batch)
	for _, h := range res.hold {
		s.hold(h.it, h.cause)
	}
	s.reschedule(ctx, res.retry)
}

// reschedule returns items readied by retryAt to the loop, all at once.
// After Run stopped firing they are dropped: another replica claims them (a
// lease of ours expires), or the next start catches them up.
func (s *Scheduler) reschedule(ctx context.Context, its []item) {
	if len(its) == 0 {
		return
	}
	select {
	case s.retry <- its:
	case <-s.stopping:
	case <-ctx.Done():
	}
}

func randomID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// randomToken is a tick lease's token or a run's id: 128 random bits.
func randomToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Clock is the source of time the scheduler reads (see WithClock): Now and
// NewTimer, as package time has them.
type Clock = clock.Clock

// Timer is the part of *time.Timer the scheduler uses. As with time.Timer
// since Go 1.23, no stale value is received from C after Stop or Reset
// returns.
type Timer = clock.Timer

// RealClock returns the Clock backed by package time.
func RealClock() Clock { return clock.Real() }
