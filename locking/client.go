package locking

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/quorum"
)

// Client takes locks on one Redis master or on a quorum of independent
// masters. One master is the ordinary case of the same code: every operation
// runs on all masters in parallel and needs len(masters)/2+1 of them.
// A Client is safe for concurrent use. Close it when done.
type Client struct {
	g       *quorum.Group
	masters []*quorum.Master
	quorum  int
	opts    options
	scripts *scripts
	hub     *hub
	wake    string // the wake channel
	wakeArg any    // the wake channel, boxed once for the release script
	mode    string // the acquire script's mode: "q", "s" or "u" (see quorum.Group.Mode)

	ctx context.Context // ends at Close

	calls quorum.Tracker // Lock calls under way: Close lets them leave the queues
	stats counters
}

func init() {
	quorum.RegisterOwner(func(owner any) *quorum.Group {
		if c, ok := owner.(*Client); ok {
			return c.g
		}
		return nil
	})
}

// New returns a Client over one Redis master: a *redis.Client (standalone,
// or Sentinel-managed through redis.NewFailoverClient) or a
// *redis.ClusterClient. The go-redis client stays owned by the caller; New
// adds a dial hook to a standalone one, which counts its new connections (a
// restart always breaks connections, so each new one leads to a check of
// the server's identity: see WithRestartQuarantine).
//
// New does not contact Redis. It fails with ErrInvalid when master is nil or
// an option is out of range.
func New(master redis.UniversalClient, opts ...Option) (*Client, error) {
	if master == nil {
		return nil, fmt.Errorf("%w: the master is a nil client", ErrInvalid)
	}
	return NewQuorum([]redis.UniversalClient{master}, opts...)
}

// NewQuorum returns a Client over several independent masters: every lock
// needs a majority of them, len(masters)/2+1 (Redlock), so the client keeps
// working while a minority is down. The masters must not replicate each
// other; each is a standalone or Sentinel-managed Redis (a Cluster can only
// be the single master). One master is the ordinary case of the same code,
// as New. The go-redis clients stay owned by the caller (see New).
//
// NewQuorum does not contact Redis. It fails with ErrInvalid when the list
// is empty, holds a nil client or a Cluster among several masters, or an
// option is out of range.
func NewQuorum(masters []redis.UniversalClient, opts ...Option) (*Client, error) {
	o := defaultOptions()
	for _, opt := range opts {
		if opt != nil { // nil options are skipped
			opt(&o)
		}
	}
	if o.lateness < time.Millisecond {
		o.lateness = time.Millisecond
	}
	if o.quarantine <= 0 {
		return nil, fmt.Errorf("%w: restart quarantine %v must be > 0 and at least the longest lock ttl (WithFreshDeployment skips it for a brand-new deployment instead)", ErrInvalid, o.quarantine)
	}
	if o.masterTimeout < 0 {
		return nil, fmt.Errorf("%w: master timeout %v is negative", ErrInvalid, o.masterTimeout)
	}
	g, err := quorum.New(masters, quorum.Options{
		Marker: markerKey(o.prefix), Quarantine: o.quarantine, Fresh: o.fresh,
		RefuseEviction: o.refuseEvict, Logger: o.quorumLogger(),
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	c := &Client{g: g, masters: g.Masters(), quorum: g.Quorum(), opts: o, scripts: newScripts(),
		wake: wakeChannelOf(o.prefix), ctx: g.Context(), mode: g.Mode()}
	c.wakeArg = c.wake
	for _, m := range c.masters {
		if r, ok := m.RDB.(*redis.Client); ok && !r.Options().ContextTimeoutEnabled {
			o.log().Warn(fmt.Sprintf("locking: master %d (%s): ContextTimeoutEnabled is off, so per-call deadlines cannot interrupt a hung connection (go-redis's read timeout applies); enable it", m.Idx, m.Addr))
		}
	}
	c.hub = newHub(c)
	return c, nil
}

// Quorum is the number of masters that must agree: len(masters)/2+1.
func (c *Client) Quorum() int { return c.quorum }

// Prepare contacts every master now: it reads each one's identity and
// configuration (reporting its eviction policy and persistence once) and
// starts the repair of any that restarted. Locks do this on their own, on
// first contact. It returns an error wrapping ErrUnavailable only when no
// master answered.
func (c *Client) Prepare(ctx context.Context) error {
	if err := c.g.Prepare(ctx); err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return nil
}

// Close stops auto-extension of every lease (they end with ErrClosed, their
// keys expire in Redis at their ttl), stops waiting calls (they leave the
// wait queues first) and closes the pub/sub connections. It does not close
// the go-redis clients.
func (c *Client) Close() error {
	c.g.Cancel()    // ends leases, extenders and waits
	c.calls.Close() // waiting Lock calls leave the queues
	c.hub.close()   // pub/sub loops return
	c.g.Close()     // background work ends
	return nil
}

func (c *Client) closed() bool { return c.g.Closed() }

// fan runs one command line of s on every master (see quorum.Group.Fan).
func (c *Client) fan(ctx context.Context, ttl time.Duration, s *quorum.Script, line []any, parse func(*redis.Cmd) (any, error), good func(quorum.Reply) bool) []quorum.Reply {
	rs := c.g.Fan(ctx, c.masterTimeout(ttl), s, line, parse, good)
	for i := range rs {
		var ce *quorum.CorruptError
		if rs[i].Err != nil && errors.As(rs[i].Err, &ce) {
			rs[i].Err = &CorruptError{Addr: ce.Addr, Key: ce.Key, Value: ce.Value}
		}
	}
	return rs
}

// masterErr names a master's part in a failure.
func masterErr(r quorum.Reply) error { return MasterError{r.M.Idx, r.M.Addr, r.Err} }

// tally counts the answers of a token-checked script (see quorum.Tally).
func tally(rs []quorum.Reply) (ones, others int, errs []error) {
	return quorum.Tally(rs, masterErr)
}

// isNetErr tells transport failures (worth retrying) from Redis error replies.
func isNetErr(err error) bool { return quorum.IsNetErr(err) }

// direct runs s on every master in parallel, outside the batches and the
// client's life (for the last words of a call cut short by Close), bounded
// by the master timeout for ttl.
func (c *Client) direct(ttl time.Duration, s *quorum.Script, keys []string, args ...any) []quorum.Reply {
	ctx, cancel := context.WithTimeout(context.Background(), c.masterTimeout(ttl))
	defer cancel()
	out := make([]quorum.Reply, len(c.masters))
	done := make(chan struct{}, len(c.masters))
	for i, m := range c.masters {
		go func() {
			v, err := s.Run(ctx, m.RDB, keys, args...).Result()
			out[i] = quorum.Reply{M: m, Val: v, Err: err}
			done <- struct{}{}
		}()
	}
	for range c.masters {
		<-done
	}
	return out
}
