package locking

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Client takes locks on one Redis master or on a quorum of independent
// masters. One master is the ordinary case of the same code: every operation
// runs on all masters in parallel and needs len(masters)/2+1 of them.
// A Client is safe for concurrent use. Close it when done.
type Client struct {
	masters []*master
	quorum  int
	opts    options
	scripts *scripts
	hub     *hub
	marker  string // the marker key (quorum mode)
	wake    string // the wake channel
	wakeArg any    // the wake channel, boxed once for the release script

	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	bg     tracker // background work: extenders, repairs, pub/sub, fan-outs
}

type master struct {
	idx   int
	rdb   redis.UniversalClient
	addr  string
	batch *batcher

	ok        atomic.Bool // checked and usable: the fast path of check
	mu        sync.Mutex
	checked   bool  // maxmemory-policy looked at
	checkErr  error // non-nil: refuse this master
	repairing bool
}

// New returns a Client over the given masters, each an independent Redis
// (standalone, Sentinel-managed or a Cluster). With several masters the
// client needs a majority for every lock (Redlock); the masters must not
// replicate each other. The go-redis clients stay owned by the caller.
//
// New does not contact Redis. It fails with ErrInvalid when the list is empty
// or holds a nil client.
func New(masters []redis.UniversalClient, opts ...Option) (*Client, error) {
	if len(masters) == 0 {
		return nil, fmt.Errorf("%w: no masters given", ErrInvalid)
	}
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	if o.lateness < time.Millisecond {
		o.lateness = time.Millisecond
	}
	if o.quarantine < 0 {
		return nil, fmt.Errorf("%w: restart quarantine %v is negative", ErrInvalid, o.quarantine)
	}
	if o.masterTimeout < 0 {
		return nil, fmt.Errorf("%w: master timeout %v is negative", ErrInvalid, o.masterTimeout)
	}
	c := &Client{quorum: len(masters)/2 + 1, opts: o, scripts: newScripts(),
		marker: o.prefix + "marker", wake: o.prefix + "wake"}
	c.wakeArg = c.wake
	for i, rdb := range masters {
		if rdb == nil {
			return nil, fmt.Errorf("%w: master %d is a nil client", ErrInvalid, i)
		}
		c.masters = append(c.masters, &master{idx: i, rdb: rdb, addr: addrOf(rdb)})
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	for _, m := range c.masters {
		m.batch = &batcher{m: m, solo: len(c.masters) == 1, rdb: m.rdb, life: c.ctx, bg: &c.bg}
	}
	for _, m := range c.masters {
		if r, ok := m.rdb.(*redis.Client); ok && !r.Options().ContextTimeoutEnabled {
			o.logger.Printf("locking: master %d (%s): ContextTimeoutEnabled is off, so per-call deadlines cannot interrupt a hung connection (go-redis's read timeout applies); enable it", m.idx, m.addr)
		}
	}
	c.hub = newHub(c)
	return c, nil
}

// Quorum is the number of masters that must agree: len(masters)/2+1.
func (c *Client) Quorum() int { return c.quorum }

// Close stops auto-extension of every lease (they end with ErrClosed, their
// keys expire in Redis at their ttl), stops waiting calls and closes the
// pub/sub connections. It does not close the go-redis clients.
func (c *Client) Close() error {
	c.cancel()
	c.hub.close()
	c.bg.close()
	return nil
}

// tracker runs the client's background goroutines so that Close can wait
// for them, and refuses new ones once Close has begun: a WaitGroup must not
// gain work while Close waits on it (calls still in flight at Close would
// otherwise race it).
type tracker struct {
	mu     sync.RWMutex
	closed bool
	wg     sync.WaitGroup
}

// spawn runs f on a goroutine that Close waits for. After Close it runs
// nothing and returns false.
func (t *tracker) spawn(f func()) bool {
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

// close refuses new goroutines and waits for the running ones.
func (t *tracker) close() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	t.wg.Wait()
}

func (c *Client) closed() bool { return c.ctx.Err() != nil }

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

// RedactURL returns u with any password replaced by "xxxxx", for logs. It
// also redacts strings that do not parse as URLs: everything between "://"
// and the last "@" of the authority goes.
func RedactURL(u string) string {
	p, err := url.Parse(u)
	if err == nil {
		if p.User == nil {
			return u
		}
		if _, ok := p.User.Password(); ok {
			p.User = url.UserPassword(p.User.Username(), "xxxxx")
		}
		return p.String()
	}
	scheme, rest, ok := strings.Cut(u, "://")
	if !ok {
		return u
	}
	authority := rest
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority = rest[:i]
	}
	at := strings.LastIndex(authority, "@")
	if at < 0 {
		return u
	}
	user, _, _ := strings.Cut(authority[:at], ":")
	return scheme + "://" + user + ":xxxxx" + rest[at:]
}

// reply is one master's answer to one call.
type reply struct {
	m   *master
	val any
	err error
}

// fanout runs fn on every master in parallel, each under the per-master
// timeout, and returns the answers in master order. When good is non-nil it
// returns as soon as a quorum of answers is good (a failure waits for every
// answer, to report each master and to learn when to retry); the calls still
// running finish in the background and their answers are dropped (a release sent to every master
// cleans up whatever they took). A master that does not answer in time counts
// as failed. With one master fn runs inline, bounded by ctx and the go-redis
// client's own timeouts.
func (c *Client) fanout(ctx context.Context, timeout time.Duration, fn func(ctx context.Context, m *master) (any, error), good func(reply) bool) []reply {
	if len(c.masters) == 1 {
		out := make([]reply, 1)
		m := c.masters[0]
		if err := c.check(ctx, m); err != nil {
			out[0] = reply{m: m, err: err}
			return out
		}
		v, err := fn(ctx, m)
		out[0] = reply{m: m, val: v, err: err}
		return out
	}
	// one deadline for all: one timer, cancelled by whoever finishes last
	// (stragglers outlive a quorum's early return)
	deadline := time.Now().Add(timeout) // ours: ctx's may come earlier
	cctx, cancel := context.WithDeadlineCause(ctx, deadline, errNoAnswer)
	var left atomic.Int32
	left.Store(int32(len(c.masters)) + 1)
	defer func() {
		if left.Add(-1) == 0 {
			cancel()
		}
	}()
	ch := make(chan reply, len(c.masters)) // buffered: stragglers never block
	for _, m := range c.masters {
		done := func() {
			if left.Add(-1) == 0 {
				cancel()
			}
		}
		if !c.bg.spawn(func() {
			defer done()
			if err := c.check(cctx, m); err != nil {
				ch <- reply{m: m, err: err}
				return
			}
			v, err := fn(cctx, m)
			ch <- reply{m: m, val: v, err: err}
		}) {
			ch <- reply{m: m, err: ErrClosed}
			done()
		}
	}
	return c.collect(cctx, deadline, ch, good, timeout)
}

// fanScript runs one command line of s (see script.line) on every master,
// with parse reading each answer, as fanout does, but each call joins its
// master's batch and whoever sends that batch delivers the answer: a busy
// master costs no goroutine per call (an idle one still gets one, which
// sends the call at once).
func (c *Client) fanScript(ctx context.Context, timeout time.Duration, s *script, line []any, parse func(*redis.Cmd) (any, error), good func(reply) bool) []reply {
	if len(c.masters) == 1 { // inline, as fanout does
		m := c.masters[0]
		out := make([]reply, 1)
		if err := c.check(ctx, m); err != nil {
			out[0] = reply{m: m, err: err}
			return out
		}
		v, err := parse(m.batch.do(ctx, s, line))
		out[0] = reply{m: m, val: v, err: err}
		return out
	}
	ready := true
	for _, m := range c.masters {
		ready = ready && m.ok.Load()
	}
	if !ready { // first contact: fanout checks each master
		return c.fanout(ctx, timeout, func(ctx context.Context, m *master) (any, error) {
			return parse(m.batch.do(ctx, s, line))
		}, good)
	}
	deadline := time.Now().Add(timeout) // ours: ctx's may come earlier
	cctx, cancel := context.WithDeadlineCause(ctx, deadline, errNoAnswer)
	f := &fan{parse: parse, ch: make(chan reply, len(c.masters)), cancel: cancel}
	f.left.Store(int32(len(c.masters)) + 1)
	defer f.release()
	for _, m := range c.masters {
		m.batch.submit(cctx, s, line, f)
	}
	return c.collect(cctx, deadline, f.ch, good, timeout)
}

// collect gathers a fan-out's answers from ch, as fanout describes. cctx is
// the calls' context: it ends at deadline with errNoAnswer, or with the
// caller's ctx.
func (c *Client) collect(cctx context.Context, deadline time.Time, ch <-chan reply, good func(reply) bool, timeout time.Duration) []reply {
	out := make([]reply, len(c.masters))
	expired := cctx.Done()
	var timer <-chan time.Time
	got := make([]bool, len(c.masters))
	ok, bad := 0, 0
	for ok+bad < len(c.masters) {
		select {
		case r := <-ch:
			out[r.m.idx], got[r.m.idx] = r, true
			if good == nil {
				bad++ // only counted, to know when all answered
				continue
			}
			if good(r) {
				ok++
			} else {
				bad++
			}
			if ok >= c.quorum {
				for i, g := range got {
					if !g {
						out[i] = reply{m: c.masters[i], err: errPending}
					}
				}
				return out
			}
		case <-expired:
			expired = nil
			if context.Cause(cctx) != errNoAnswer {
				// ctx ended: the calls return at once with its error; wait
				// for them, still no longer than the timeout
				t := time.NewTimer(time.Until(deadline))
				defer t.Stop()
				timer = t.C
				continue
			}
			return c.unanswered(out, got, timeout)
		case <-timer:
			return c.unanswered(out, got, timeout)
		}
	}
	return out
}

// errNoAnswer ends a fanout's calls at its timeout.
var errNoAnswer = errors.New("locking: master timeout")

// unanswered fills in the masters that did not answer in time.
func (c *Client) unanswered(out []reply, got []bool, timeout time.Duration) []reply {
	for i, g := range got {
		if !g {
			out[i] = reply{m: c.masters[i], err: fmt.Errorf("no answer within %v", timeout)}
		}
	}
	return out
}

// errPending marks a master whose answer was not needed: a quorum had decided.
var errPending = errors.New("answer not awaited: a quorum had decided")

// check looks at a master's maxmemory-policy on first contact.
func (c *Client) check(ctx context.Context, m *master) error {
	if m.ok.Load() {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.checked {
		return m.checkErr
	}
	res, err := m.rdb.ConfigGet(ctx, "maxmemory-policy").Result()
	if err != nil {
		if isNetErr(err) {
			return err // try again on the next contact
		}
		// CONFIG may be disabled (managed Redis): say so once and go on.
		m.checked = true
		m.ok.Store(true)
		c.opts.logger.Printf("locking: master %d (%s): cannot read maxmemory-policy (%v); make sure it is noeviction", m.idx, m.addr, err)
		return nil
	}
	m.checked = true
	policy := res["maxmemory-policy"]
	if policy == "" || policy == "noeviction" {
		m.ok.Store(true)
		return nil
	}
	if c.opts.refuseEvict {
		m.checkErr = fmt.Errorf("%w: maxmemory-policy is %s, locks need noeviction", ErrEviction, policy)
		return m.checkErr
	}
	c.opts.logger.Printf("locking: master %d (%s): maxmemory-policy is %s: under memory pressure Redis may evict locks and fencing counters; set noeviction", m.idx, m.addr, policy)
	m.ok.Store(true)
	return nil
}

// isNetErr tells transport failures (worth retrying) from Redis error replies.
func isNetErr(err error) bool {
	var re redis.Error
	if errors.As(err, &re) {
		return false
	}
	return true
}
