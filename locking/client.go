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

	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // background work: extenders, repairs, pub/sub
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
	c := &Client{quorum: len(masters)/2 + 1, opts: o, scripts: newScripts()}
	for i, rdb := range masters {
		if rdb == nil {
			return nil, fmt.Errorf("%w: master %d is a nil client", ErrInvalid, i)
		}
		c.masters = append(c.masters, &master{idx: i, rdb: rdb, addr: addrOf(rdb)})
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	for _, m := range c.masters {
		m.batch = &batcher{rdb: m.rdb, life: c.ctx}
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
	c.wg.Wait()
	return nil
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
	out := make([]reply, len(c.masters))
	if len(c.masters) == 1 {
		m := c.masters[0]
		if err := c.check(ctx, m); err != nil {
			out[0] = reply{m: m, err: err}
			return out
		}
		v, err := fn(ctx, m)
		out[0] = reply{m: m, val: v, err: err}
		return out
	}
	ch := make(chan reply, len(c.masters)) // buffered: stragglers never block
	for _, m := range c.masters {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			cctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			if err := c.check(cctx, m); err != nil {
				ch <- reply{m: m, err: err}
				return
			}
			v, err := fn(cctx, m)
			ch <- reply{m: m, val: v, err: err}
		}()
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
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
		case <-timer.C:
			for i, g := range got {
				if !g {
					out[i] = reply{m: c.masters[i], err: fmt.Errorf("no answer within %v", timeout)}
				}
			}
			return out
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
