package locking

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// hub holds the client's one pub/sub subscription per master to the wake
// channel and routes wake messages to the local waiters.
//
// A release publishes only when someone waits: "r|token|name" when the key
// was freed (one local waiter of that name is woken: the others stay asleep,
// so waiters do not stampede Redis), "h|token|name" when it was handed to the
// fair waiter with that token, "a|token|name" when every waiter of the
// name should re-check (a read/write lock's writer or last reader left: all
// the readers, or a writer, may go). With several masters every release publishes
// once per master, and each message wakes a waiter: the first may arrive
// before the other masters have released, and an attempt made on it alone
// would fail and then sleep until the holder's ttl.
//
// A new leader of an election publishes "e|token|name" when it has recorded
// its term: every observer of that election (Election.Observe) reads again.
type hub struct {
	c *Client

	mu      sync.Mutex
	started bool
	subs    []*redis.PubSub
	byName  map[string][]*waiter
	byToken map[string]*waiter
	obs     map[string][]chan struct{} // observers of an election, by its lock's name (buffered 1)
}

type waiter struct {
	names []string // the locks it waits for (a semaphore's waiter: every slot)
	token string
	ch    chan struct{} // buffered 1: a wake is never lost, never blocks
	woke  int           // index in names of the lock whose release woke it last (under hub.mu)
}

// wokeBy returns the index in w.names of the lock whose release woke w last.
func (h *hub) wokeBy(w *waiter) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return w.woke
}

// wake signals w for a release of the lock name.
func wake(w *waiter, name string) {
	if len(w.names) > 1 {
		for i, n := range w.names {
			if n == name {
				w.woke = i
			}
		}
	}
	signal(w)
}

func newHub(c *Client) *hub {
	return &hub{c: c, byName: map[string][]*waiter{}, byToken: map[string]*waiter{}, obs: map[string][]chan struct{}{}}
}

// ensure subscribes on every master, once, and waits (at most timeout) for
// the confirmations, so that a release right after our first attempt is heard.
// A master that does not confirm is not fatal: its waiters fall back to
// re-checking at the holder's remaining ttl.
func (h *hub) ensure(ctx context.Context, timeout time.Duration) {
	h.mu.Lock()
	if h.started || h.c.closed() {
		h.mu.Unlock()
		return
	}
	h.started = true
	confirmed := make(chan struct{}, len(h.c.masters))
	for _, m := range h.c.masters {
		ps := m.RDB.Subscribe(h.c.ctx)
		h.subs = append(h.subs, ps)
		if !h.c.g.Spawn(func() { h.loop(ps, confirmed) }) {
			confirmed <- struct{}{} // closing: nobody waits for this one
		}
	}
	h.mu.Unlock()
	for _, ps := range h.subs {
		_ = ps.Subscribe(h.c.ctx, h.c.wakeChannel())
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	for range h.c.masters {
		select {
		case <-confirmed:
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

func (h *hub) loop(ps *redis.PubSub, confirmed chan<- struct{}) {
	first := true
	for {
		msg, err := ps.Receive(h.c.ctx)
		if h.c.closed() {
			return
		}
		if err != nil {
			// go-redis reconnects and re-subscribes on the next Receive;
			// pause briefly so a dead master does not spin this loop.
			t := time.NewTimer(50 * time.Millisecond)
			select {
			case <-h.c.ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			continue
		}
		switch m := msg.(type) {
		case *redis.Subscription:
			if first {
				first = false
				confirmed <- struct{}{}
			}
			// (re)subscribed: a release may have published before we were
			// listening (a slow first subscription, a reconnect), so every
			// waiter re-checks once
			h.wakeAll()
		case *redis.Message:
			h.dispatch(m.Payload)
		}
	}
}

func (h *hub) dispatch(payload string) {
	kind, rest, ok := strings.Cut(payload, "|")
	if !ok {
		return
	}
	token, name, ok := strings.Cut(rest, "|")
	if !ok {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if kind == "e" {
		for _, ch := range h.obs[name] {
			poke(ch)
		}
		return
	}
	if kind == "h" {
		if w := h.byToken[token]; w != nil {
			signal(w)
		}
		return
	}
	if kind == "a" {
		for _, w := range h.byName[name] {
			wake(w, name)
		}
		return
	}
	for _, w := range h.byName[name] {
		if len(w.ch) == 0 {
			wake(w, name)
			return
		}
	}
}

func signal(w *waiter) { poke(w.ch) }

// poke sends on a channel buffered 1 unless a signal is already pending.
func poke(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// observe registers an observer of the election whose lock is name.
func (h *hub) observe(name string, ch chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.obs[name] = append(h.obs[name], ch)
}

// unobserve forgets an observer.
func (h *hub) unobserve(name string, ch chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	chs := h.obs[name]
	for i, x := range chs {
		if x == ch {
			chs = append(chs[:i:i], chs[i+1:]...)
			break
		}
	}
	if len(chs) == 0 {
		delete(h.obs, name)
	} else {
		h.obs[name] = chs
	}
}

func (h *hub) wakeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, ws := range h.byName {
		for _, w := range ws {
			signal(w)
		}
	}
	for _, chs := range h.obs {
		for _, ch := range chs {
			poke(ch)
		}
	}
}

func (h *hub) add(token string, names []string) *waiter {
	w := &waiter{names: names, token: token, ch: make(chan struct{}, 1)}
	h.mu.Lock()
	for _, name := range names {
		h.byName[name] = append(h.byName[name], w)
	}
	h.byToken[token] = w
	h.mu.Unlock()
	return w
}

// remove forgets w. A waiter that gives up passes on a wake it did not use.
func (h *hub) remove(w *waiter, gaveUp bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.byToken, w.token)
	var next *waiter
	for _, name := range w.names {
		ws := h.byName[name]
		for i, x := range ws {
			if x == w {
				ws = append(ws[:i:i], ws[i+1:]...)
				break
			}
		}
		if len(ws) == 0 {
			delete(h.byName, name)
		} else {
			h.byName[name] = ws
			if next == nil {
				next = ws[0]
			}
		}
	}
	// a wake that arrived for w but was not used goes to the next waiter
	if gaveUp && len(w.ch) > 0 && next != nil {
		signal(next)
	}
}

func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, ps := range h.subs {
		_ = ps.Close()
	}
	h.subs = nil
}
