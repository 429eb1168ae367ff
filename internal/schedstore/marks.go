package schedstore

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Mark is the newest state of a schedule id a replica saw: the created and
// version of its newest bound definition (Record.Bound), or that the
// schedule created at Created, last at Version, was deleted. A definition
// older than the mark is a copy put back (by a writer of the queue Redis
// replaying what it read, or an older snapshot of it), and is refused.
type Mark struct {
	Created int64 // unix ms
	Version int64
	Deleted bool
}

// admits tells whether a bound definition at version v of the schedule
// created at c is not older than m.
func (m Mark) admits(c, v int64) bool {
	if m.Deleted {
		return c > m.Created
	}
	return c > m.Created || c == m.Created && v >= m.Version
}

// below tells whether m is older than o: o admits nothing m refuses, and
// more.
func (m Mark) below(o Mark) bool {
	switch {
	case m.Created != o.Created:
		return m.Created < o.Created
	case m.Deleted != o.Deleted:
		return o.Deleted
	}
	return m.Version < o.Version
}

func (m Mark) String() string {
	s := strconv.FormatInt(m.Created, 10) + "|" + strconv.FormatInt(m.Version, 10)
	if m.Deleted {
		s += "|d"
	}
	return s
}

// parseMark reads a Mark as String writes it.
func parseMark(s string) (Mark, bool) {
	parts := strings.Split(s, "|")
	if len(parts) < 2 || len(parts) > 3 || len(parts) == 3 && parts[2] != "d" {
		return Mark{}, false
	}
	c, ok1 := decimal(parts[0])
	v, ok2 := decimal(parts[1])
	return Mark{Created: c, Version: v, Deleted: len(parts) == 3}, ok1 && ok2
}

// Marks keeps the replicas' marks (Mark) where a writer of the queue Redis
// cannot reach them, so that a replica started again refuses what the
// running ones refused. Of every shard of the store at once: a mark stays
// with its id when baton init moves the schedules to another shard count.
type Marks interface {
	// Raise raises the marks of ms's ids to ms where they are below.
	Raise(ctx context.Context, ms map[string]Mark) error
	// Load returns every mark.
	Load(ctx context.Context) (map[string]Mark, error)
	// Get returns the mark of id; false when there is none.
	Get(ctx context.Context, id string) (Mark, bool, error)
	// Reserve reserves version v of the schedule id created at created
	// (unix ms) for a definition about to be signed: granted only above
	// every version of it reserved before, so that no two definitions are
	// signed for one (id, created, version). Not granted, high is the
	// highest version of it reserved, at least v.
	Reserve(ctx context.Context, id string, created, v int64) (granted bool, high int64, err error)
}

// MasterMarks keeps the marks on the lock masters: a hash on each,
// NS:schedmarks (id -> "created|version", "|d" when deleted). A
// raise is written to every master and holds when a majority took it; a
// load reads a majority and keeps the highest mark of each id, so it finds
// every raise that held.
type MasterMarks struct {
	masters []redis.UniversalClient
	ns      string
}

// NewMasterMarks returns the marks of namespace ns on masters (the lock
// masters; the queue Redis when it is the lock master: then a writer of it
// reaches them, as docs/operating.md says).
func NewMasterMarks(masters []redis.UniversalClient, ns string) *MasterMarks {
	return &MasterMarks{masters: masters, ns: ns}
}

func (m *MasterMarks) key() string { return marksKey(m.ns) }

var (
	//go:embed lua/reservesigned.lua
	reserveSrc    string
	reserveScript = redis.NewScript(reserveSrc)
	//go:embed lua/raisemarks.lua
	raiseMarksSrc    string
	raiseMarksScript = redis.NewScript(raiseMarksSrc)
)

// raiseBatch is how many marks one script call raises.
const raiseBatch = 500

// Raise writes ms to every master, a batch at a time.
func (m *MasterMarks) Raise(ctx context.Context, ms map[string]Mark) error {
	args := make([]any, 0, 2*len(ms))
	for id, mk := range ms {
		args = append(args, id, mk.String())
	}
	return m.majority(func(c redis.UniversalClient) error {
		for i := 0; i < len(args); i += 2 * raiseBatch {
			if err := raiseMarksScript.Run(ctx, c, []string{m.key()}, args[i:min(i+2*raiseBatch, len(args))]...).Err(); err != nil && !errors.Is(err, redis.Nil) {
				return err
			}
		}
		return nil
	})
}

// Load reads the marks from every master and keeps each id's highest.
func (m *MasterMarks) Load(ctx context.Context) (map[string]Mark, error) {
	var mu sync.Mutex
	out := map[string]Mark{}
	err := m.majority(func(c redis.UniversalClient) error {
		var cursor uint64
		for {
			kv, next, err := c.HScan(ctx, m.key(), cursor, "", 1000).Result()
			if err != nil {
				return err
			}
			mu.Lock()
			for i := 0; i+1 < len(kv); i += 2 {
				mk, ok := parseMark(kv[i+1])
				if !ok {
					continue // not a mark: raised over by the next put
				}
				if cur, had := out[kv[i]]; !had || cur.below(mk) {
					out[kv[i]] = mk
				}
			}
			mu.Unlock()
			if cursor = next; cursor == 0 {
				return nil
			}
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Get reads id's mark from every master and returns the highest.
func (m *MasterMarks) Get(ctx context.Context, id string) (Mark, bool, error) {
	var mu sync.Mutex
	var out Mark
	found := false
	err := m.majority(func(c redis.UniversalClient) error {
		v, err := c.HGet(ctx, m.key(), id).Result()
		if errors.Is(err, redis.Nil) {
			return nil
		}
		if err != nil {
			return err
		}
		mk, ok := parseMark(v)
		mu.Lock()
		defer mu.Unlock()
		if ok && (!found || out.below(mk)) {
			out, found = mk, true
		}
		return nil
	})
	return out, found, err
}

// Reserve reserves version v on every master (NS:schedsigned,
// "id|created" -> version): granted when a majority granted it. Each
// master grants a version once, and above every one before, so two puts
// that want the same one are not both granted: two majorities share a
// master.
func (m *MasterMarks) Reserve(ctx context.Context, id string, created, v int64) (bool, int64, error) {
	var mu sync.Mutex
	granted := 0
	high := v
	field := id + "|" + strconv.FormatInt(created, 10)
	err := m.majority(func(c redis.UniversalClient) error {
		res, err := reserveScript.Run(ctx, c, []string{signedKey(m.ns)}, field, v).Int64Slice()
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		switch {
		case len(res) == 1:
			granted++
		case len(res) == 2:
			high = max(high, res[1])
		}
		return nil
	})
	if err != nil {
		return false, 0, fmt.Errorf("%s: reserve the version to sign: %w", describe(id), err)
	}
	return granted > len(m.masters)/2, high, nil
}

// majority runs do on every master at once; nil when a majority succeeded.
func (m *MasterMarks) majority(do func(redis.UniversalClient) error) error {
	errs := make([]error, len(m.masters))
	var wg sync.WaitGroup
	for i, c := range m.masters {
		wg.Go(func() { errs[i] = do(c) })
	}
	wg.Wait()
	failed := 0
	for _, err := range errs {
		if err != nil {
			failed++
		}
	}
	if n := len(m.masters); failed > 0 && n-failed <= n/2 {
		return fmt.Errorf("runtime schedules' marks: %d of %d lock masters failed: %w", failed, n, errors.Join(errs...))
	}
	return nil
}

// older tells why rec is older than what the Follower saw of its id (its
// Mark), nil when it is not (or the store has no signing keys). Under f.mu.
func (f *Follower) older(rec Record) error {
	m, ok := f.marks[rec.ID]
	if !ok || !f.st.sign.Enabled() {
		return nil
	}
	return olderThan(rec, m, "this replica saw")
}

// OlderError is a stored definition older than the replicas' mark of its
// id: a copy put back.
type OlderError struct {
	ID   string
	why  string
	Mark Mark
}

func (e *OlderError) Error() string { return e.why }

// olderThan tells why rec is older than mark m (seen by who), nil when it
// is not.
func olderThan(rec Record, m Mark, who string) error {
	created := func(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano) }
	var why string
	switch {
	case !rec.Bound:
		why = fmt.Sprintf("%s: a definition signed for its id alone (before 0.2.0), where %s one signed for its version (%d, created %s): refused as a copy put back (put the schedule again)",
			describe(rec.ID), who, m.Version, created(m.Created))
	case m.admits(rec.Created.UnixMilli(), rec.Version):
		return nil
	case m.Deleted:
		why = fmt.Sprintf("%s: a definition (version %d) of the schedule created %s, which was deleted, put back into the queue Redis: refused (put the schedule again to run it)",
			describe(rec.ID), rec.Version, created(rec.Created.UnixMilli()))
	default:
		why = fmt.Sprintf("%s: version %d (created %s) put back into the queue Redis where %s version %d (created %s): refused as older (put the schedule again to run it)",
			describe(rec.ID), rec.Version, created(rec.Created.UnixMilli()), who, m.Version, created(m.Created))
	}
	return &OlderError{ID: rec.ID, why: why, Mark: m}
}

// Older tells why rec, read from s, is older than the replicas' mark of
// its id (an *OlderError), nil when it is not, or when s has no marks
// (WithMarks) or no signing keys.
func (s *Store) Older(ctx context.Context, rec Record) error {
	if !s.sign.Enabled() {
		return nil
	}
	m, ok, err := s.markOf(ctx, rec.ID)
	if err != nil || !ok {
		return err
	}
	return olderThan(rec, m, "the replicas saw")
}

// raise raises id's mark to m where it is below, and notes it for keep.
// Under f.mu.
func (f *Follower) raise(id string, m Mark) {
	if !f.st.sign.Enabled() {
		return
	}
	if cur, ok := f.marks[id]; ok && !cur.below(m) {
		return
	}
	f.marks[id] = m
	if f.keep == nil {
		return
	}
	sh := f.st.ShardOf(id)
	if f.raised[sh] == nil {
		f.raised[sh] = map[string]Mark{}
	}
	f.raised[sh][id] = m
}

// loadMarks reads the kept marks (of every shard) before the first read
// of a shard. Under applyMu.
func (f *Follower) loadMarks(ctx context.Context) error {
	if f.keep == nil || f.loaded.Load() || !f.st.sign.Enabled() {
		return nil
	}
	ms, err := f.keep.Load(ctx)
	if err != nil {
		return fmt.Errorf("runtime schedules: read the marks of what replicas saw: %w", err)
	}
	f.mu.Lock()
	for id, m := range ms {
		if cur, ok := f.marks[id]; !ok || cur.below(m) {
			f.marks[id] = m
		}
	}
	f.mu.Unlock()
	f.loaded.Store(true)
	return nil
}

// keepMarks writes the marks of shard sh raised since the last write to
// keep; a failure is logged (once until a write succeeds) and retried with
// the next change or read. Under applyMu.
func (f *Follower) keepMarks(ctx context.Context, sh int) {
	f.mu.Lock()
	ms := f.raised[sh]
	f.raised[sh] = nil
	f.mu.Unlock()
	if len(ms) == 0 {
		return
	}
	if err := f.keep.Raise(ctx, ms); err != nil {
		f.mu.Lock()
		for id, m := range ms {
			if cur, ok := f.raised[sh][id]; !ok || cur.below(m) {
				if f.raised[sh] == nil {
					f.raised[sh] = map[string]Mark{}
				}
				f.raised[sh][id] = m
			}
		}
		f.mu.Unlock()
		if !f.keepWarned {
			f.keepWarned = true
			f.log.Warn("cannot keep the marks of the runtime schedules seen on the lock masters; retrying with the next change (until then a replica started again would not refuse an older definition put back)", "shard", sh, "err", err)
		}
		return
	}
	f.keepWarned = false
}

// olderFetched is older for a record read outside the copy (ScheduleJob):
// a copy that has not read the kept marks (a Follower that does not sync,
// as an admin tool's) has the record's mark read from keep.
func (f *Follower) olderFetched(ctx context.Context, rec Record) error {
	f.mu.RLock()
	_, known := f.marks[rec.ID]
	f.mu.RUnlock()
	if !known && !f.loaded.Load() && f.keep != nil && f.st.sign.Enabled() {
		m, ok, err := f.keep.Get(ctx, rec.ID)
		if err != nil {
			return fmt.Errorf("%s: read the mark of what replicas saw of it: %w", describe(rec.ID), err)
		}
		if ok {
			f.mu.Lock()
			if cur, had := f.marks[rec.ID]; !had || cur.below(m) {
				f.marks[rec.ID] = m
			}
			f.mu.Unlock()
		}
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.older(rec)
}
