package quorum

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Logger receives the group's warnings. A logger that also has an Infof
// method gets the one-time reports (each master's persistence, a fresh
// deployment marked); others do not.
type Logger interface {
	Printf(format string, v ...any)
}

// infof sends an informational message to loggers that take them.
func (g *Group) infof(format string, v ...any) {
	if l, ok := g.opts.Logger.(interface{ Infof(string, ...any) }); ok {
		l.Infof(format, v...)
	}
}

type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}

// CounterTTL is how long a fencing counter lives on a master of a quorum
// after it was seeded or written back (INCR keeps the expiry). A counter that
// expired is seeded again from the master's clock in microseconds, which is
// above every fence issued before as long as the masters' clocks are within
// CounterTTL of each other; so counters stay bounded by the names used in the
// last CounterTTL, and a busy lock pays one fence write-back a day.
const CounterTTL = 24 * time.Hour

// Options configure a Group.
type Options struct {
	// Marker is the marker key every master carries while it may vote.
	Marker string
	// Quarantine is how long a restarted master stays out of quorums,
	// counted on its clock from the moment it may have lost writes: at least
	// the longest lock ttl in use. Must be > 0.
	Quarantine time.Duration
	// Fresh lets masters that carry no trace of an earlier life (no master
	// has a marker) vote at once, as a brand-new deployment. When every
	// master restarted empty at once this is unsafe: a live holder's lock is
	// forgotten. Off by default.
	Fresh bool
	// RefuseEviction refuses masters whose maxmemory-policy may evict keys.
	RefuseEviction bool
	// Logger gets the one-time reports; nil: none.
	Logger Logger
}

// Group is a set of independent Redis masters deciding by majority. One
// master is the ordinary case of the same code.
type Group struct {
	masters []*Master
	quorum  int
	opts    Options
	mark    *Script

	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	bg     Tracker

	repairMu sync.Mutex // one repair at a time

	// testHook, when set, is called at named points of a repair (tests).
	testHook func(point string, m *Master)
}

// New returns a group over clients, which stay owned by the caller. A
// standalone master (*redis.Client, also Sentinel-managed) gets a dial hook
// that counts its new connections; a Cluster can only be the single master,
// and its restarts are not detected (its nodes cannot carry one marker).
// New does not contact Redis.
func New(clients []redis.UniversalClient, o Options) (*Group, error) {
	if len(clients) == 0 {
		return nil, errors.New("no masters given")
	}
	if o.Marker == "" {
		return nil, errors.New("no marker key")
	}
	if o.Quarantine <= 0 {
		return nil, fmt.Errorf("restart quarantine %v must be > 0 (at least the longest lock ttl)", o.Quarantine)
	}
	if o.Logger == nil {
		o.Logger = nopLogger{}
	}
	g := &Group{quorum: len(clients)/2 + 1, opts: o, mark: NewScript(markSrc)}
	g.ctx, g.cancel = context.WithCancel(context.Background())
	for i, rdb := range clients {
		if rdb == nil {
			return nil, fmt.Errorf("master %d is a nil client", i)
		}
		m := &Master{Idx: i, RDB: rdb, g: g, Addr: addrOf(rdb)}
		switch r := rdb.(type) {
		case *redis.Client:
			m.tracked = true
			r.AddHook(dialCounter{m})
		case *redis.ClusterClient:
			m.cluster = true
			if len(clients) > 1 {
				return nil, fmt.Errorf("master %d is a Redis Cluster: a quorum needs standalone masters (a Cluster can be the only master)", i)
			}
		default:
			return nil, fmt.Errorf("master %d: unsupported client type %T (give a *redis.Client or a *redis.ClusterClient)", i, rdb)
		}
		m.batch = &batcher{m: m, solo: len(clients) == 1, life: g.ctx, bg: &g.bg}
		g.masters = append(g.masters, m)
	}
	return g, nil
}

// Masters returns the masters in the order given to New.
func (g *Group) Masters() []*Master { return g.masters }

// Quorum is the number of masters that must agree: len(masters)/2+1.
func (g *Group) Quorum() int { return g.quorum }

// MarkerKey is the marker key.
func (g *Group) MarkerKey() string { return g.opts.Marker }

// Quarantine is the restart quarantine.
func (g *Group) Quarantine() time.Duration { return g.opts.Quarantine }

// Mode names the group's kind for scripts: "q" a quorum of several masters,
// "s" one standalone master, "u" one master whose restarts are not tracked
// (a Cluster): its scripts get no marker key.
func (g *Group) Mode() string {
	switch {
	case len(g.masters) > 1:
		return "q"
	case g.masters[0].tracked:
		return "s"
	}
	return "u"
}

// Context ends at Close.
func (g *Group) Context() context.Context { return g.ctx }

// Closed reports whether Close was called.
func (g *Group) Closed() bool { return g.ctx.Err() != nil }

// Spawn runs f on a goroutine that Close waits for; after Close it runs
// nothing and returns false.
func (g *Group) Spawn(f func()) bool { return g.bg.Spawn(f) }

// Cancel ends the group's context: background work and queued calls stop.
func (g *Group) Cancel() { g.cancel() }

// Close ends the group's context, refuses new background work and waits for
// the running work. The go-redis clients stay open.
func (g *Group) Close() {
	g.cancel()
	g.bg.Close()
}

// Tracker runs background goroutines so that Close can wait for them, and
// refuses new ones once Close has begun: a WaitGroup must not gain work
// while Close waits on it.
type Tracker struct {
	mu     sync.RWMutex
	closed bool
	wg     sync.WaitGroup
}

// Spawn runs f on a goroutine that Close waits for. After Close it runs
// nothing and returns false.
func (t *Tracker) Spawn(f func()) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.closed {
		return false
	}
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		f()
	}()
	return true
}

// Enter counts the caller's own work, which Close waits for until Leave;
// after Close it counts nothing and returns false.
func (t *Tracker) Enter() bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.closed {
		return false
	}
	t.wg.Add(1)
	return true
}

// Leave ends work counted by Enter.
func (t *Tracker) Leave() { t.wg.Done() }

// Close refuses new goroutines and waits for the running ones.
func (t *Tracker) Close() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	t.wg.Wait()
}

// addrOf names a master for errors and logs, never with credentials.
func addrOf(rdb redis.UniversalClient) string {
	switch r := rdb.(type) {
	case *redis.Client:
		return r.Options().Addr
	case *redis.ClusterClient:
		return "cluster(" + strings.Join(r.Options().Addrs, ",") + ")"
	}
	return fmt.Sprintf("%T", rdb)
}

// IsNetErr tells transport failures (worth retrying) from Redis error replies.
func IsNetErr(err error) bool {
	var re redis.Error
	return !errors.As(err, &re)
}

// The scheduler's tick claims run on the lock client's masters, with the
// same restart checks, through the lock client's Group. Package locking
// registers how to reach it, so that its public API shows no internal type.

var groupOf func(owner any) *Group

// RegisterOwner tells Of how to find the Group behind an owner (package
// locking registers its *Client at init).
func RegisterOwner(f func(owner any) *Group) { groupOf = f }

// Of returns the Group behind owner (a *locking.Client), or nil when owner
// has none.
func Of(owner any) *Group {
	if groupOf == nil {
		return nil
	}
	return groupOf(owner)
}
