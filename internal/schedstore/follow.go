package schedstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/config"
)

// Change is a runtime schedule a Follower found put: its record and its job
// as config.DecodeSchedule made it.
type Change struct {
	Rec Record
	Job *config.Job
}

// Refusal is a stored schedule a Follower does not run, and why: its
// record cannot be read, is not signed as the signing keys require, or is
// not a valid definition (for this replica's config: an http prefix it
// does not allow, a queue it does not know).
type Refusal struct {
	ID  string
	Err error
}

// Follower holds a replica's copy of the runtime schedules: Sync reads them
// all, Run follows the stream of changes as they are made and reads them
// all again every resync. It calls apply with what changed, from one
// goroutine at a time, in the order of the changes. As a config.JobSource
// it gives the jobs of the copy; with WithFetch, a schedule the copy does
// not hold yet is read from Redis.
type Follower struct {
	st      *Store
	base    *config.Config
	apply   func(put []Change, removed []string)
	log     *slog.Logger
	resync  time.Duration
	fetch   bool
	warned  sync.Map     // stored values ScheduleJob found invalid and logged
	nwarned atomic.Int64 // about how many warned holds

	wentBackReport func(WentBack)
	wentBackN      atomic.Int64 // how many times a shard was found gone back

	beforeBatch func() // tests: called before each batch of a restore

	refusedFn func(names []string) // WithRefusals

	mu     sync.RWMutex
	byName map[string]entry // job name (a calendar: its id) -> the schedule as last read
	// the calendars of byName, by name, and the base they make
	// (config.Config.WithCalendars): under mu
	cals     map[string]*config.CalendarSpec
	calsBase *config.Config
	// calendars and schedules changed or gone since the last recheck (a
	// schedule only when others run after it)
	dirty []string
	// parent job name -> the names of the runtime schedules of the copy
	// that run after it (after:)
	children   map[string]map[string]bool
	fresh      map[string]bool   // the chained schedules the last changed decoded (under applyMu)
	refused    map[string]error  // id -> why it is not run
	refusedRaw map[string]string // id -> its stored value (put back when Redis goes back), when known
	// id -> the newest of it seen (with signing keys only): an older
	// definition is refused
	marks map[string]Mark
	// by shard, the marks raised since they were last kept in keep
	raised []map[string]Mark

	keep       Marks       // where marks outlive the replica (nil: in memory only)
	keepWarned bool        // a failure to keep them was logged (under applyMu)
	loaded     atomic.Bool // keep's marks were read

	applyMu sync.Mutex   // one reader at a time: Sync, the streams, resyncs
	shards  []shardState // by shard, under applyMu
}

// shardState is how far a Follower's copy of one shard is.
type shardState struct {
	ver    int64     // the last change applied
	last   string    // the stream id of the last change read
	synced time.Time // when the last full read was applied
}

// wentBack tells, from a shard's version and stream now (its last entry,
// and its first entry at or after the copy's last: nil when none), whether
// the store holds fewer changes than the copy read: its version or last
// entry is older than the copy's, or the copy's last entry is gone and the
// entry after it does not continue the copy's count (changes were made
// since a restart or an older snapshot; a stream trimmed past the copy
// continues it).
func (st shardState) wentBack(ver int64, last string, after *redis.XMessage) bool {
	if ver < st.ver || streamIDLess(last, st.last) {
		return true
	}
	if after == nil || after.ID == st.last {
		return false
	}
	v, _ := strconv.ParseInt(fmt.Sprint(after.Values["ver"]), 10, 64)
	return v <= st.ver
}

type entry struct {
	// raw is the stored value as last read: what a resync compares, and
	// what is put back when Redis went back (restore.go)
	raw   string
	job   *config.Job          // a schedule's
	cal   *config.CalendarSpec // a calendar's
	ref   config.ScheduleRef
	bound bool // its signature vouches for its created and version
}

// keyOf is the key of id in the copy (byName): a schedule's job name, a
// calendar's id.
func keyOf(id string) string {
	if _, cal := CalendarName(id); cal {
		return id
	}
	return config.ScheduleJobName(id)
}

// idOf is the id of key of the copy.
func idOf(key string) string {
	if id, ok := config.ScheduleID(key); ok {
		return id
	}
	return key
}

// FollowerOption configures a Follower.
type FollowerOption func(*Follower)

// WithLogger sets the logger. Default: none.
func WithLogger(l *slog.Logger) FollowerOption { return func(f *Follower) { f.log = l } }

// WithMarks keeps the marks of what the Follower saw (Mark) in keep as
// well, and reads them from it before a shard's first read, so that a
// replica started again refuses an older definition put back as the
// running ones do. Only with signing keys (without them nothing is bound).
// Default: in memory only.
func WithMarks(keep Marks) FollowerOption { return func(f *Follower) { f.keep = keep } }

// WithRefusals passes to refused the schedules the copy held and now
// refuses (a definition this replica does not take, a calendar or parent
// gone): they are no longer run here, but they are not deleted (other
// replicas may run them), so what apply does for a delete (forget their
// shared marks) is not done until they are. Default: apply them as
// removed.
func WithRefusals(refused func(names []string)) FollowerOption {
	return func(f *Follower) { f.refusedFn = refused }
}

// goneRefused applies as removed the schedules of ids, refused and now
// deleted from the store, when refusals go to WithRefusals (whose schedules
// were taken out without what a delete does).
func (f *Follower) goneRefused(ids []string) {
	if f.refusedFn == nil || len(ids) == 0 {
		return
	}
	var names []string
	for _, id := range ids {
		if _, isCal := CalendarName(id); !isCal {
			names = append(names, config.ScheduleJobName(id))
		}
	}
	if len(names) > 0 {
		f.apply(nil, names)
	}
}

// WithFetch makes ScheduleJob read a schedule the copy does not hold from
// Redis (a worker's run of a schedule put a moment ago). Default: off.
func WithFetch() FollowerOption { return func(f *Follower) { f.fetch = true } }

// NewFollower returns a Follower of st's schedules, checked against base
// (config.DecodeSchedule), calling apply (nil: nothing) with each change.
func NewFollower(st *Store, base *config.Config, apply func(put []Change, removed []string), opts ...FollowerOption) *Follower {
	f := &Follower{st: st, base: base, apply: apply, log: slog.New(slog.DiscardHandler), resync: base.Schedules.Resync,
		byName: map[string]entry{}, cals: map[string]*config.CalendarSpec{}, children: map[string]map[string]bool{}, calsBase: base, refused: map[string]error{}, refusedRaw: map[string]string{}, shards: make([]shardState, st.Shards()),
		marks: map[string]Mark{}, raised: make([]map[string]Mark, st.Shards())}
	for _, o := range opts {
		o(f)
	}
	if f.apply == nil {
		f.apply = func([]Change, []string) {}
	}
	return f
}

// ScheduleJob returns the job of the runtime schedule named name
// (config.JobSource).
func (f *Follower) ScheduleJob(name string) (*config.Job, bool) {
	f.mu.RLock()
	e, ok := f.byName[name]
	f.mu.RUnlock()
	if ok {
		return e.job, true
	}
	id, isSched := config.ScheduleID(name)
	if !f.fetch || !isSched || config.CheckScheduleID(id) != nil {
		return nil, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	rec, err := f.st.Get(ctx, id)
	if err != nil {
		// logged once per schedule and reason: a worker asks at every task
		if !errors.Is(err, ErrNotFound) && f.firstWarning(name+"\x00"+err.Error()) {
			f.log.Warn("cannot read a runtime schedule", "job", name, "err", err)
		}
		return nil, false
	}
	if err = f.olderFetched(ctx, rec); err != nil {
		if f.firstWarning(rec.raw) {
			f.log.Warn("runtime schedule refused: not run", "job", name, "err", err)
		}
		return nil, false
	}
	j, err := f.decode(ctx, rec)
	if err != nil {
		// logged once per definition: a worker asks at every task
		if f.firstWarning(rec.raw) {
			f.log.Warn("runtime schedule refused: not a valid definition for this replica", "job", name, "err", err)
		}
		return nil, false
	}
	return j, true
}

// warnedMax bounds what firstWarning remembers: past it, it starts over
// (a warning may come again).
const warnedMax = 10000

// firstWarning tells whether the warning keyed key is logged for the first
// time.
func (f *Follower) firstWarning(key string) bool {
	if _, seen := f.warned.LoadOrStore(key, true); seen {
		return false
	}
	if f.nwarned.Add(1) > warnedMax {
		f.warned.Clear()
		f.nwarned.Store(0)
	}
	return true
}

// Len returns how many schedules the copy holds (refused ones and
// calendars not counted).
func (f *Follower) Len() int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return len(f.byName) - len(f.cals)
}

// Calendars returns the calendars put at runtime that the copy holds, by
// name.
func (f *Follower) Calendars() map[string]*config.CalendarSpec {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return maps.Clone(f.cals)
}

// Refused returns the schedules the copy does not run, and why.
func (f *Follower) Refused() []Refusal {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]Refusal, 0, len(f.refused))
	for _, id := range slices.Sorted(maps.Keys(f.refused)) {
		out = append(out, Refusal{ID: id, Err: f.refused[id]})
	}
	return out
}

// Version returns the last change the copy holds of schedule id's shard:
// a put of id whose Record.Change is at most this is in the copy.
func (f *Follower) Version(id string) int64 {
	f.applyMu.Lock()
	defer f.applyMu.Unlock()
	return f.shards[f.st.ShardOf(id)].ver
}

// Sync reads every schedule and applies what differs from the copy. It
// logs what it read, and each schedule it refuses (once per definition).
func (f *Follower) Sync(ctx context.Context) error {
	began := time.Now()
	var ver int64
	for k := range f.shards {
		if err := f.syncShard(ctx, k, false); err != nil {
			return err
		}
		f.applyMu.Lock()
		ver += f.shards[k].ver
		f.applyMu.Unlock()
	}
	f.log.Info("runtime schedules read", "schedules", f.Len(), "refused", len(f.Refused()), "shards", len(f.shards),
		"version", ver, "took", time.Since(began).Round(time.Millisecond))
	return nil
}

// syncShard reads every schedule of shard sh and applies what differs from
// the copy. When the store went back since the copy read it (back: the
// stream of changes said so; or the shard's version or last change is
// older than the copy's), it first puts the store back to the copy's state
// (restoreShard) and reports it.
func (f *Follower) syncShard(ctx context.Context, sh int, back bool) error {
	f.applyMu.Lock()
	defer f.applyMu.Unlock()
	if err := f.loadMarks(ctx); err != nil {
		return err
	}
	prev := f.shards[sh]
	ver, last, raws, after, err := f.readShard(ctx, sh, prev.last)
	if err != nil {
		return err
	}
	if !prev.synced.IsZero() && (back || prev.wentBack(ver, last, after)) {
		wb, err := f.restoreShard(ctx, sh, prev, ver)
		if err != nil {
			// the copy is not replaced by what Redis holds: retried
			return fmt.Errorf("the store went back (version %d, the copy had read %d) and could not be put back: %w", ver, prev.ver, err)
		}
		if wb.Lost() || ver < prev.ver {
			f.wentBackN.Add(1)
			if f.wentBackReport != nil {
				f.wentBackReport(wb)
			}
		} else {
			f.log.Info("runtime schedules: the stream of changes went back, the schedules did not", "shard", sh, "had", prev.ver, "now", ver)
		}
		// the store as restored (the claim alone raised its version)
		if ver, last, raws, _, err = f.readShard(ctx, sh, ""); err != nil {
			return err
		}
	}
	f.mu.RLock()
	var removed []string
	for name := range f.byName {
		if id := idOf(name); f.st.ShardOf(id) == sh && raws[id] == "" {
			removed = append(removed, name)
		}
	}
	var unrefused []string
	for id := range f.refused {
		if _, ok := raws[id]; !ok && f.st.ShardOf(id) == sh {
			unrefused = append(unrefused, id)
		}
	}
	f.mu.RUnlock()
	for _, id := range unrefused {
		f.forgetRefusal(id)
	}
	f.goneRefused(unrefused)
	put := f.changed(ctx, raws, false)
	f.commit(ctx, put, removed)
	f.recheck(ctx)
	f.keepMarks(ctx, sh)
	f.shards[sh] = shardState{ver: ver, last: last, synced: time.Now()}
	return nil
}

// readShard reads shard sh whole: its version, the stream's last entry and
// its first entry at or after since (the last the copy read), at one
// instant, and every stored value, by id.
func (f *Follower) readShard(ctx context.Context, sh int, since string) (ver int64, last string, raws map[string]string, after *redis.XMessage, err error) {
	k := f.st.shards[sh]
	var verCmd *redis.StringCmd
	var lastCmd, afterCmd *redis.XMessageSliceCmd
	// the version and the stream's last entry, at one instant: what the
	// scan below may miss comes after that entry
	_, err = f.st.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		verCmd = p.Get(ctx, k.ver)
		lastCmd = p.XRevRangeN(ctx, k.log, "+", "-", 1)
		if since != "" {
			afterCmd = p.XRangeN(ctx, k.log, since, "+", 1)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, "", nil, nil, fmt.Errorf("runtime schedules: read the version: %w", err)
	}
	ver, err = verCmd.Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, "", nil, nil, fmt.Errorf("runtime schedules: the version in %s: %w", k.ver, err)
	}
	last = "0-0"
	if msgs, _ := lastCmd.Result(); len(msgs) == 1 {
		last = msgs[0].ID
	}
	if afterCmd != nil {
		if msgs, _ := afterCmd.Result(); len(msgs) == 1 {
			after = &msgs[0]
		}
	}
	raws = map[string]string{}
	var cursor uint64
	for {
		kv, next, err := f.st.rdb.HScan(ctx, k.defs, cursor, "", 1000).Result()
		if err != nil {
			return 0, "", nil, nil, fmt.Errorf("runtime schedules: read them all: %w", err)
		}
		for i := 0; i+1 < len(kv); i += 2 {
			if f.st.ShardOf(kv[i]) != sh {
				// not this shard's (a copy a move left, written by hand):
				// Get and Delete look for it elsewhere, so it is not run
				if f.firstWarning("stray\x00" + kv[i]) {
					f.log.Warn("runtime schedule found in another shard than its own: not run (run baton init to move it)", "id", kv[i], "key", k.defs)
				}
				continue
			}
			raws[kv[i]] = kv[i+1]
		}
		if cursor = next; cursor == 0 {
			return ver, last, raws, after, nil
		}
	}
}

// changed decodes the values of raws that differ from the copy's (all of
// them when force), on every core: at start a replica decodes them all (a
// million, it may be). The calendars among them go into the copy first
// (putCalendars), and the schedules are decoded with them.
func (f *Follower) changed(ctx context.Context, raws map[string]string, force bool) []Change {
	type decoded struct {
		id, raw string
		c       Change
		err     error
	}
	var todo []decoded
	cals := map[string]string{}
	f.mu.RLock()
	for id, raw := range raws {
		if e, ok := f.byName[keyOf(id)]; ok && e.raw == raw && !force {
			continue
		}
		if _, isCal := CalendarName(id); isCal {
			cals[id] = raw
			continue
		}
		todo = append(todo, decoded{id: id, raw: raw})
	}
	f.mu.RUnlock()
	f.putCalendars(cals)
	workers := min(runtime.GOMAXPROCS(0), len(todo)/decodePerWorker+1)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(todo); i += workers {
				d := &todo[i]
				d.c.Rec, d.err = f.st.parse(d.id, d.raw)
			}
		})
	}
	wg.Wait()
	var recs []Record
	for _, d := range todo {
		if d.err == nil {
			recs = append(recs, d.c.Rec)
		}
	}
	f.fetchCalendars(ctx, recs)
	// the schedules run after others are decoded after the rest, parents
	// first, each finding its parents among those decoded here or in the
	// copy (batchSource)
	batch := &batchSource{f: f, batch: map[string]*config.Job{}}
	f.mu.RLock()
	base := f.calsBase.WithSource(batch)
	f.mu.RUnlock()
	var chained []int
	for i := range todo {
		if d := &todo[i]; d.err == nil && chainedDoc(d.c.Rec.Doc) {
			chained = append(chained, i)
		}
	}
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(todo); i += workers {
				if d := &todo[i]; d.err == nil && !chainedDoc(d.c.Rec.Doc) {
					d.c.Job, d.err = d.c.Rec.Job(base)
				}
			}
		})
	}
	wg.Wait()
	for _, d := range todo {
		if d.err == nil && d.c.Job != nil {
			batch.batch[d.c.Job.Name] = d.c.Job
		}
	}
	decodeInOrder(len(chained), func(k int) []string { return parentsOf(todo[chained[k]].c.Rec.Doc) },
		func(k int) string { return config.ScheduleJobName(todo[chained[k]].id) },
		func(k int) {
			d := &todo[chained[k]]
			if d.c.Job, d.err = d.c.Rec.Job(base); d.err == nil {
				batch.batch[d.c.Job.Name] = d.c.Job
			}
		})
	f.fresh = map[string]bool{}
	for _, i := range chained {
		f.fresh[config.ScheduleJobName(todo[i].id)] = true
	}
	var put []Change
	for _, d := range todo {
		if d.err == nil {
			f.mu.RLock()
			d.err = f.older(d.c.Rec)
			f.mu.RUnlock()
		}
		if d.err != nil {
			f.refuse(d.id, d.raw, d.err)
			continue
		}
		f.forgetRefusal(d.id)
		put = append(put, d.c)
	}
	return put
}

// decodePerWorker is about the fewest definitions worth a goroutine of
// their own.
const decodePerWorker = 256

// refuse keeps why id is not run, logs it once per stored value, and drops
// it from the copy (its previous definition no longer stands).
func (f *Follower) refuse(id, raw string, err error) {
	f.mu.Lock()
	prev, had := f.refused[id]
	f.refused[id] = err
	if raw != "" {
		f.refusedRaw[id] = raw
	} else {
		delete(f.refusedRaw, id)
	}
	name := keyOf(id)
	prevEntry, inCopy := f.byName[name]
	delete(f.byName, name)
	if inCopy && prevEntry.job != nil {
		f.unlink(prevEntry.job)
	}
	calName, isCal := CalendarName(id)
	if isCal && inCopy {
		f.dropCalendar(calName)
	}
	f.mu.Unlock()
	if inCopy && !isCal {
		if f.refusedFn != nil {
			f.refusedFn([]string{name})
		} else {
			f.apply(nil, []string{name})
		}
	}
	switch {
	case had && prev.Error() == err.Error():
	case isCal:
		f.log.Warn("runtime calendar refused: the schedules that name it are not run", "calendar", calName, "err", err, "bytes", len(raw))
	default:
		f.log.Warn("runtime schedule refused: not run", "job", name, "err", err, "bytes", len(raw))
	}
}

func (f *Follower) forgetRefusal(id string) {
	f.mu.Lock()
	delete(f.refused, id)
	delete(f.refusedRaw, id)
	f.mu.Unlock()
}

// commit puts the changes into the copy and passes them to apply; a
// calendar removed is noted for recheck.
func (f *Follower) commit(ctx context.Context, put []Change, removed []string) {
	if len(put) == 0 && len(removed) == 0 {
		return
	}
	var jobs []string // schedules removed
	f.mu.Lock()
	for _, c := range put {
		if prev, ok := f.byName[c.Job.Name]; ok && prev.job != nil {
			f.unlink(prev.job)
		}
		f.link(c.Job)
		// the job decoded from it, and its stored value (to tell a
		// changed one, and to put it back when Redis goes back)
		f.byName[c.Job.Name] = entry{raw: c.Rec.raw, job: c.Job, ref: c.Rec.Ref(), bound: c.Rec.Bound}
		if c.Rec.Bound {
			f.raise(c.Rec.ID, Mark{Created: c.Rec.Created.UnixMilli(), Version: c.Rec.Version})
		}
	}
	for _, n := range removed {
		e, ok := f.byName[n]
		if ok && e.bound {
			// deleted: no definition of it comes back (a new schedule
			// under its id is created after the delete)
			f.raise(idOf(n), Mark{Created: e.ref.Created.UnixMilli(), Version: e.ref.Version, Deleted: true})
		}
		delete(f.byName, n)
		if ok && e.job != nil {
			f.unlink(e.job)
		}
		if name, isCal := CalendarName(n); isCal {
			if ok {
				f.dropCalendar(name)
			}
			continue
		}
		jobs = append(jobs, n)
	}
	if len(put) > 0 && f.refusedDependent() {
		// a schedule refused for a parent or a calendar it lacked may
		// decode now (recheck retries them)
		f.dirty = append(f.dirty, config.ScheduleJobName(""))
	}
	f.mu.Unlock()
	f.apply(put, jobs)
}

// Run follows the changes until ctx ends: it reads each shard's stream of
// changes as they are made, and every schedule of the shard again every
// schedules.resync, or at once when the stream shows a gap (a replica that
// fell behind its length, a Redis that restarted empty). Sync must have
// been called, or Run reads each shard first. Failures are logged and
// retried every second.
func (f *Follower) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for sh := range f.shards {
		wg.Go(func() { f.runShard(ctx, sh) })
	}
	wg.Wait()
}

// runShard follows shard sh's changes until ctx ends.
func (f *Follower) runShard(ctx context.Context, sh int) {
	f.applyMu.Lock()
	needSync := f.shards[sh].synced.IsZero()
	f.applyMu.Unlock()
	back := false // the stream said the store went back
	for ctx.Err() == nil {
		f.applyMu.Lock()
		synced := f.shards[sh].synced
		f.applyMu.Unlock()
		if needSync || time.Since(synced) >= f.resync {
			if err := f.syncShard(ctx, sh, back); err != nil {
				if ctx.Err() == nil {
					f.log.Warn("cannot read the runtime schedules; retrying", "shard", sh, "err", err)
					sleep(ctx, time.Second)
				}
				continue
			}
			needSync, back = false, false
			continue
		}
		gap, wentBack, err := f.follow(ctx, sh, synced)
		if err != nil {
			if ctx.Err() == nil {
				f.log.Warn("cannot follow the runtime schedules' changes; retrying", "shard", sh, "err", err)
				sleep(ctx, time.Second)
			}
			continue
		}
		needSync, back = gap || wentBack, wentBack
	}
}

// followBlock is how long one read of the stream waits for a change.
const followBlock = 2 * time.Second

// follow reads shard sh's changes after the last one read, waiting up to
// followBlock for one (less when the shard's resync, synced + resync, comes
// sooner), and applies them; gap reports that some were missed (the
// stream was trimmed past the copy), back that the store went back.
func (f *Follower) follow(ctx context.Context, sh int, synced time.Time) (gap, back bool, err error) {
	f.applyMu.Lock()
	last := f.shards[sh].last
	f.applyMu.Unlock()
	block := min(followBlock, max(time.Until(synced.Add(f.resync)), time.Millisecond))
	res, err := f.st.rdb.XRead(ctx, &redis.XReadArgs{Streams: []string{f.st.shards[sh].log, last}, Count: 1000, Block: block}).Result()
	if errors.Is(err, redis.Nil) {
		back, err := f.wentBack(ctx, sh)
		return false, back, err
	}
	if err != nil {
		return false, false, err
	}
	f.applyMu.Lock()
	defer f.applyMu.Unlock()
	if f.shards[sh].last != last {
		return false, false, nil // a Sync ran meanwhile: read again from its entry
	}
	var ids []string
	seen := map[string]bool{}
	ver, lastID := f.shards[sh].ver, f.shards[sh].last
	for _, s := range res {
		for _, m := range s.Messages {
			v, _ := strconv.ParseInt(fmt.Sprint(m.Values["ver"]), 10, 64)
			if v <= ver {
				// the count restarted (Redis restarted empty, or from an
				// older snapshot) and changes were made since
				return false, true, nil
			}
			if v != ver+1 {
				// changes lost: the stream was trimmed past us
				f.log.Info("runtime schedules: changes missed; reading the shard's all", "shard", sh, "had", ver, "next", v)
				return true, false, nil
			}
			ver, lastID = v, m.ID
			if id, ok := m.Values["id"].(string); ok && !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
	}
	recs, bad, err := f.st.GetMany(ctx, ids)
	if err != nil {
		return false, false, err
	}
	var put []Change
	var removed []string
	raws := map[string]string{}
	for _, id := range ids {
		if err := bad[id]; err != nil {
			// its stored value, put back if Redis goes back
			raw, _ := f.st.rdb.HGet(ctx, f.st.keysOf(id).defs, id).Result()
			f.refuse(id, raw, err)
			continue
		}
		r, ok := recs[id]
		if !ok {
			name := keyOf(id)
			f.mu.RLock()
			_, had := f.byName[name]
			f.mu.RUnlock()
			if had {
				removed = append(removed, name)
			}
			f.mu.RLock()
			_, wasRefused := f.refused[id]
			f.mu.RUnlock()
			f.forgetRefusal(id)
			if wasRefused {
				f.goneRefused([]string{id})
			}
			continue
		}
		raws[id] = r.raw
	}
	put = f.changed(ctx, raws, false)
	f.commit(ctx, put, removed)
	f.recheck(ctx)
	f.keepMarks(ctx, sh)
	f.shards[sh].ver, f.shards[sh].last = ver, lastID
	return false, false, nil
}

// wentBack tells, after a read of the stream found no change, whether
// Redis lost changes the copy holds: a Redis that restarted empty, or from
// an older snapshot, with no change made since shows no entry after the
// last one read (its new entries, if any, come before it), so the stream
// alone cannot tell. The change count or the stream's last entry gone
// back says it.
func (f *Follower) wentBack(ctx context.Context, sh int) (bool, error) {
	k := f.st.shards[sh]
	var verCmd *redis.StringCmd
	var lastCmd *redis.XMessageSliceCmd
	_, err := f.st.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		verCmd = p.Get(ctx, k.ver)
		lastCmd = p.XRevRangeN(ctx, k.log, "+", "-", 1)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return false, err
	}
	ver, err := verCmd.Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		return false, fmt.Errorf("runtime schedules: the version in %s: %w", k.ver, err)
	}
	last := "0-0"
	if msgs, _ := lastCmd.Result(); len(msgs) == 1 {
		last = msgs[0].ID
	}
	f.applyMu.Lock()
	defer f.applyMu.Unlock()
	if st := f.shards[sh]; ver < st.ver || streamIDLess(last, st.last) {
		return true, nil
	}
	return false, nil
}

// streamIDLess tells whether stream entry id a comes before b.
func streamIDLess(a, b string) bool {
	parse := func(id string) (ms, seq uint64) {
		m, s, _ := strings.Cut(id, "-")
		ms, _ = strconv.ParseUint(m, 10, 64)
		seq, _ = strconv.ParseUint(s, 10, 64)
		return ms, seq
	}
	am, as := parse(a)
	bm, bs := parse(b)
	return am < bm || am == bm && as < bs
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
