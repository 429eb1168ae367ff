package batonhttp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/locking"
)

// The probes, and the deployment's status and locks.

// healthz answers 200 "ok" while the process serves.
func (h *Handler) healthz(w http.ResponseWriter, _ *http.Request) {
	fmt.Fprintln(w, "ok")
}

// readyz answers 200 "ok" when every replica was ready at the last check,
// 503 and the reasons otherwise. A ready replica that waits (a lock master
// in its restart quarantine: Replica.Waiting) is still ready, as it serves
// the API and will claim once the master votes: "ok" is followed by what it
// waits for.
func (h *Handler) readyz(w http.ResponseWriter, _ *http.Request) {
	reasons := *h.ready.Load()
	if h.draining.Load() {
		reasons = "shutting down"
	}
	if reasons != "" {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, reasons)
		return
	}
	fmt.Fprintln(w, "ok")
	if waiting := h.waiting.Load(); waiting != nil && *waiting != "" {
		fmt.Fprintln(w, *waiting)
	}
}

// status answers GET /api/status: Cluster.Status, shared by the requests
// of statusEvery, without the masters' addresses, and with what only this
// process knows (statusAnswer).
func (h *Handler) status(ctx context.Context, _ *http.Request) (any, error) {
	st, err := h.statuses.get(ctx, func(ctx context.Context) (*baton.Status, error) {
		st, err := h.cluster.Status(ctx)
		if st != nil && err != nil {
			// a read may need no token: the reason names no address (as /readyz)
			st.Warnings = append(st.Warnings, "partial: "+addressRE.ReplaceAllString(h.cluster.Config().MaskSecrets(err.Error()), ""))
			err = nil
		}
		if st != nil {
			// a read may need no token: masters named by their index in
			// locking.masters, without address or error text
			for i := range st.Masters {
				m := &st.Masters[i]
				m.Addr = ""
				if m.Err != "" {
					m.Err = "did not answer"
				}
			}
		}
		return st, err
	})
	if st == nil {
		return nil, err
	}
	return h.statusAnswer(st), err
}

// locks answers GET /api/locks: Cluster.Locks, the locks listed when some
// masters answered.
func (h *Handler) locks(ctx context.Context, _ *http.Request) (any, error) {
	held, err := h.cluster.Locks(ctx)
	if held == nil {
		held = []locking.HeldLock{}
	}
	if err != nil && !errors.Is(err, locking.ErrUnavailable) {
		err = nil // some masters answered: listed
	}
	return held, err
}

// statusEvery is how long an answer of /api/status serves: dashboards poll
// it every 2 seconds each, and a status scans the lock masters' keys.
const statusEvery = time.Second

// statusCache shares one Cluster.Status among the requests of statusEvery.
type statusCache struct {
	mu sync.Mutex
	at time.Time
	st *baton.Status
}

func (c *statusCache) get(ctx context.Context, read func(context.Context) (*baton.Status, error)) (*baton.Status, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.st != nil && time.Since(c.at) < statusEvery {
		return c.st, nil
	}
	st, err := read(ctx)
	if err == nil {
		c.st, c.at = st, time.Now()
	}
	return st, err
}

func (c *statusCache) forget() {
	c.mu.Lock()
	c.st = nil
	c.mu.Unlock()
}

// statusAnswer is what GET /api/status answers: the deployment's Status,
// and what only this process knows or its config says, for the
// dashboard's banner.
type statusAnswer struct {
	*baton.Status
	// Held are the ticks this process's schedulers hold back now (lock
	// masters or queue failing), per replica; none when none are held.
	Held []heldTicks `json:"held,omitempty"`
	// Unsigned is true when security.signing_keys is not set: tasks are
	// not signed, and anyone who can write to the queue Redis can make
	// baton run a cron job.
	Unsigned bool `json:"unsigned,omitempty"`
	// MaxClockSkew is the config's max_clock_skew (nanoseconds, as the
	// replicas' skew): a replica off by more does not claim.
	MaxClockSkew time.Duration `json:"max_clock_skew"`
}

// heldTicks is how many ticks one replica holds back.
type heldTicks struct {
	Replica string `json:"replica"`
	Ticks   int    `json:"ticks"`
}

// statusAnswer adds to st what this process knows (a copy: st is shared
// by the requests of statusEvery).
func (h *Handler) statusAnswer(st *baton.Status) statusAnswer {
	cfg := h.cluster.Config()
	a := statusAnswer{Status: st, MaxClockSkew: cfg.MaxClockSkew, Unsigned: len(cfg.Security.SigningKeys) == 0}
	for _, rp := range h.replicas {
		if n := rp.HeldTicks(); n > 0 {
			a.Held = append(a.Held, heldTicks{Replica: rp.ID(), Ticks: n})
		}
	}
	return a
}
