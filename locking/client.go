package locking

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
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
	idx  int
	rdb  redis.UniversalClient
	addr string

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

// RedactURL returns u with any password replaced by "xxxxx", for logs.
func RedactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil || p.User == nil {
		return u
	}
	if _, ok := p.User.Password(); ok {
		p.User = url.UserPassword(p.User.Username(), "xxxxx")
	}
	return p.String()
}

// reply is one master's answer to one call.
type reply struct {
	m   *master
	val any
	err error
}

// fanout runs fn on every master in parallel, each under its own timeout, and
// returns the answers in master order. A master that does not answer in time
// counts as failed; its call is abandoned (it ends at the go-redis client's
// own timeout). With one master fn runs inline.
func (c *Client) fanout(ctx context.Context, timeout time.Duration, fn func(ctx context.Context, m *master) (any, error)) []reply {
	out := make([]reply, len(c.masters))
	call := func(m *master) reply {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		if err := c.check(cctx, m); err != nil {
			return reply{m: m, err: err}
		}
		v, err := fn(cctx, m)
		return reply{m: m, val: v, err: err}
	}
	if len(c.masters) == 1 {
		out[0] = call(c.masters[0])
		return out
	}
	ch := make(chan reply, len(c.masters))
	for _, m := range c.masters {
		go func() { ch <- call(m) }()
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	got := make([]bool, len(c.masters))
	for n := 0; n < len(c.masters); n++ {
		select {
		case r := <-ch:
			out[r.m.idx], got[r.m.idx] = r, true
		case <-timer.C:
			for i, ok := range got {
				if !ok {
					out[i] = reply{m: c.masters[i], err: fmt.Errorf("no answer within %v", timeout)}
				}
			}
			return out
		}
	}
	return out
}

// check looks at a master's maxmemory-policy on first contact.
func (c *Client) check(ctx context.Context, m *master) error {
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
		c.opts.logger.Printf("locking: master %d (%s): cannot read maxmemory-policy (%v); make sure it is noeviction", m.idx, m.addr, err)
		return nil
	}
	m.checked = true
	policy := res["maxmemory-policy"]
	if policy == "" || policy == "noeviction" {
		return nil
	}
	if c.opts.refuseEvict {
		m.checkErr = fmt.Errorf("%w: maxmemory-policy is %s, locks need noeviction", ErrEviction, policy)
		return m.checkErr
	}
	c.opts.logger.Printf("locking: master %d (%s): maxmemory-policy is %s: under memory pressure Redis may evict locks and fencing counters; set noeviction", m.idx, m.addr, policy)
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
