package quorum

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	// ErrClosed is the answer to calls made after Close.
	ErrClosed = errors.New("locking: client closed")
	// ErrPending marks a master whose answer was not awaited: a quorum had
	// decided.
	ErrPending = errors.New("answer not awaited: a quorum had decided")
	// errNoAnswer ends a fan-out's calls at its timeout.
	errNoAnswer = errors.New("master timeout")
)

// Reply is one master's answer to one call.
type Reply struct {
	M   *Master
	Val any
	Err error
	// Resent: a read or write failed on one of the master's connections
	// during the call, so go-redis may have sent it twice (a retry after a
	// lost reply); a call that went to another process is never trusted.
	Resent bool
}

// Fan runs one command line of s (see Script.Line) on every master, each
// joining its master's batch (so one master runs the calls in the order they
// were made), and parse reads each answer. When good is non-nil Fan returns
// as soon as a quorum of answers is good (the others are ErrPending: they
// still run, and their answers are dropped); otherwise, or when a quorum
// cannot be good, it waits for every answer. A master that does not answer
// within timeout counts as failed. With one master the call runs inline,
// bounded by ctx and the go-redis client's own timeouts.
func (g *Group) Fan(ctx context.Context, timeout time.Duration, s *Script, line []any, parse func(*redis.Cmd) (any, error), good func(Reply) bool) []Reply {
	if len(g.masters) == 1 {
		m := g.masters[0]
		cmd, resent := m.batch.do(ctx, s, line)
		v, err := parse(cmd)
		return []Reply{{M: m, Val: v, Err: err, Resent: resent}}
	}
	deadline := time.Now().Add(timeout) // ours: ctx's may come earlier
	cctx, cancel := context.WithDeadlineCause(ctx, deadline, errNoAnswer)
	f := &fan{parse: parse, ch: make(chan Reply, len(g.masters)), cancel: cancel}
	f.left.Store(int32(len(g.masters)) + 1)
	defer f.release()
	for _, m := range g.masters {
		m.batch.submit(cctx, s, line, f)
	}
	return g.collect(cctx, deadline, f.ch, good, timeout)
}

// collect gathers a fan-out's answers from ch, as Fan describes. cctx is the
// calls' context: it ends at deadline with errNoAnswer, or with the caller's.
func (g *Group) collect(cctx context.Context, deadline time.Time, ch <-chan Reply, good func(Reply) bool, timeout time.Duration) []Reply {
	out := make([]Reply, len(g.masters))
	expired := cctx.Done()
	var timer <-chan time.Time
	got := make([]bool, len(g.masters))
	ok, bad := 0, 0
	for ok+bad < len(g.masters) {
		select {
		case r := <-ch:
			out[r.M.Idx], got[r.M.Idx] = r, true
			if good == nil {
				bad++ // only counted, to know when all answered
				continue
			}
			if good(r) {
				ok++
			} else {
				bad++
			}
			if ok >= g.quorum {
				for i, seen := range got {
					if !seen {
						out[i] = Reply{M: g.masters[i], Err: ErrPending}
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
			return g.unanswered(out, got, timeout)
		case <-timer:
			return g.unanswered(out, got, timeout)
		}
	}
	return out
}

// unanswered fills in the masters that did not answer in time.
func (g *Group) unanswered(out []Reply, got []bool, timeout time.Duration) []Reply {
	for i, seen := range got {
		if !seen {
			out[i] = Reply{M: g.masters[i], Err: fmt.Errorf("no answer within %v", timeout)}
		}
	}
	return out
}

// Tally counts the answers of a token-checked script: ones (the key held the
// token), others (it did not), and the masters' errors (ErrPending answers
// count nowhere). wrap names a master in an error.
func Tally(rs []Reply, wrap func(Reply) error) (ones, others int, errs []error) {
	for _, r := range rs {
		switch {
		case errors.Is(r.Err, ErrPending):
		case r.Err != nil:
			errs = append(errs, wrap(r))
		case r.Val.(int64) == 1:
			ones++
		default:
			others++
		}
	}
	return ones, others, errs
}

// Pipeline runs script s once per item, n items, on every master: one
// pipelined round trip per master, all masters in parallel, each bounded by
// timeout plus 100µs an item (a big pipeline takes longer to answer, more so
// on a loaded Redis). A master that may not receive calls (see Admit)
// answers every item with why; items whose script the server did not know
// are sent again whole. args gives item i's keys and arguments. The answers
// are indexed [master][item].
func (g *Group) Pipeline(ctx context.Context, timeout time.Duration, s *Script, n int, args func(i int) ([]string, []any)) [][]Reply {
	lines := make([][]any, n)
	for i := range lines {
		keys, a := args(i)
		lines[i] = s.Line(keys, a...)
	}
	out := make([][]Reply, len(g.masters))
	var wg sync.WaitGroup
	for mi, m := range g.masters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, timeout+time.Duration(n)*100*time.Microsecond)
			defer cancel()
			out[mi] = m.pipeline(cctx, s, lines)
		}()
	}
	wg.Wait()
	return out
}

func (m *Master) pipeline(ctx context.Context, s *Script, lines [][]any) []Reply {
	res := make([]Reply, len(lines))
	fail := func(err error) []Reply {
		for i := range res {
			res[i] = Reply{M: m, Err: err}
		}
		return res
	}
	a, err := m.Admit(ctx)
	if err != nil {
		return fail(err)
	}
	scripts := make([]*Script, len(lines))
	for i := range scripts {
		scripts[i] = s
	}
	cmds := m.runLines(ctx, scripts, lines, true)
	ok, resent := m.Trust(ctx, a)
	if !ok {
		return fail(ErrReconnected)
	}
	for i, c := range cmds {
		m.corrupt(c, lines[i])
		res[i] = Reply{M: m, Val: c.Val(), Err: c.Err(), Resent: resent}
	}
	return res
}
