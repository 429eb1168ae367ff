package quorum

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// batcher coalesces the script calls that many goroutines make to one master
// into pipelines. While fewer than maxInFlight calls or pipelines are under
// way, a call goes out at once; beyond that, calls queue, and when a pipeline
// returns the next one leaves with everything that queued meanwhile (or
// earlier, when enough calls wait: see minBatch). Under load this turns N
// round trips (and 2N syscalls on each side) into a few, which is most of the
// cost of a lock on a busy machine; alone it adds nothing.
//
// A call comes either from a goroutine that waits for its answer (do), or
// from a fan-out over several masters that only wants the answer delivered
// (submit). The oldest waiting caller leads the next pipeline; when nobody
// waits, a worker goroutine sends the pipelines until the queue is empty, so
// a fan-out costs no goroutine per master while its master is busy.
type batcher struct {
	m    *Master
	solo bool            // the group's only master: extra pipelines allowed
	life context.Context // the client's: a batch is not cut short by one caller's ctx
	bg   *Tracker        // the client's background work: the workers

	mu    sync.Mutex
	busy  int // calls or pipelines under way
	queue []*call
	calls sync.Pool // *call, each with its channel: queued calls allocate nothing
}

// maxInFlight is how many calls or pipelines may be under way at once on one
// master before calls queue. One gives the biggest batches; in the lock
// benchmark (16 goroutines, 3 and 5 masters) 4 lost a third of the
// throughput that 1 reaches, and 2 costs more CPU per lock on one master.
const maxInFlight = 1

// A waiting caller may yet lead an extra pipeline at once, up to maxPipelines
// under way, when at least minBatch calls queue (its own included): the
// master then has work while the client reads the previous answers, and the
// batches stay large. On one master with 16 goroutines this gained about a
// tenth of the throughput of the strict single pipeline. Only a client with a
// single master does this: there every caller waits for each answer before
// its next call, so pipelines on several connections cannot reorder one
// caller's calls; a quorum's early return leaves calls in flight that a
// release must follow, not overtake.
const (
	maxPipelines = 3
	minBatch     = 3
)

type call struct {
	s      *Script
	line   []any // the EVALSHA command line
	cmd    *redis.Cmd
	resent bool      // a connection of the master failed during the call (see Master.Trust)
	done   chan bool // a waiting caller's: true lead the next batch; false cmd holds the answer
	batch  []*call   // set with done <- true: the calls to send, in queue order
	fan    *fan      // a submitted call's: where its answer goes
}

// fan collects the answers of one script call submitted to every master.
type fan struct {
	parse  func(*redis.Cmd) (any, error)
	ch     chan Reply // buffered, one slot per master: a late answer never blocks
	left   atomic.Int32
	cancel context.CancelFunc // of the calls' context: when all have answered
}

// release drops one reference; the last one ends the calls' context.
func (f *fan) release() {
	if f.left.Add(-1) == 0 {
		f.cancel()
	}
}

func (b *batcher) newCall(s *Script, line []any) *call {
	c, _ := b.calls.Get().(*call)
	if c == nil {
		c = &call{done: make(chan bool, 1)}
	}
	c.s, c.line = s, line
	return c
}

func (b *batcher) freeCall(c *call) {
	*c = call{done: c.done}
	b.calls.Put(c)
}

// do executes the command line of s (see script.line), batched with
// concurrent calls.
func (b *batcher) do(ctx context.Context, s *Script, line []any) (*redis.Cmd, bool) {
	b.mu.Lock()
	if b.busy < maxInFlight {
		b.busy++
		b.mu.Unlock()
		cmd, resent := b.send(ctx, s, line)
		b.workInBackground(b.next(nil))
		return cmd, resent
	}
	c := b.newCall(s, line)
	b.queue = append(b.queue, c)
	if b.solo && b.busy < maxPipelines && len(b.queue) >= minBatch {
		b.busy++
		batch := b.queue
		b.queue = nil
		b.mu.Unlock()
		b.exec(batch, c)
		b.workInBackground(b.next(batch))
	} else {
		b.mu.Unlock()
		if lead := <-c.done; lead {
			batch := c.batch
			b.exec(batch, c)
			b.workInBackground(b.next(batch))
		}
	}
	cmd, resent := c.cmd, c.resent
	b.freeCall(c)
	return cmd, resent
}

// submit sends the command line of s, batched with concurrent calls, and
// delivers the answer to f. It does not wait. A call sent alone at once runs
// under ctx.
func (b *batcher) submit(ctx context.Context, s *Script, line []any, f *fan) {
	c := b.newCall(s, line)
	c.fan = f
	b.mu.Lock()
	if b.busy < maxInFlight {
		b.busy++
		b.mu.Unlock()
		if !b.bg.Spawn(func() {
			c.cmd, c.resent = b.send(ctx, s, line)
			b.deliver(c)
			b.work(b.next(nil))
		}) {
			c.cmd = redis.NewCmd(ctx)
			c.cmd.SetErr(ErrClosed)
			b.deliver(c)
			b.work(b.next(nil)) // what queued meanwhile still gets its answers
		}
		return
	}
	b.queue = append(b.queue, c)
	b.mu.Unlock()
}

// next frees the slot of a finished call or pipeline, or passes it on with
// the queued calls: to the oldest waiting caller among them, or, when only
// submitted calls queue, back to the caller, who must send them (the
// returned batch). done is the batch just sent, if any: its slice becomes
// the next queue.
func (b *batcher) next(done []*call) []*call {
	clear(done)
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.queue) == 0 {
		b.busy--
		if b.queue == nil && done != nil {
			b.queue = done[:0]
		}
		return nil
	}
	batch := b.queue
	b.queue = done[:0]
	// the batch keeps its order: a master runs one caller's calls in the
	// order they were made (a release sent after an acquire must not run
	// before it)
	for _, c := range batch {
		if c.fan == nil {
			c.batch = batch
			c.done <- true
			return nil
		}
	}
	return batch
}

// workInBackground has a worker send a batch of submitted calls that a waiting caller
// was left with: the caller's own answer is not held up.
func (b *batcher) workInBackground(batch []*call) {
	if batch == nil {
		return
	}
	if !b.bg.Spawn(func() { b.work(batch) }) {
		b.work(batch) // the client is closing: the caller sends them
	}
}

// work sends batches of submitted calls until none queue.
func (b *batcher) work(batch []*call) {
	for batch != nil {
		b.exec(batch, nil)
		batch = b.next(batch)
	}
}

// deliver hands a submitted call's answer to its fan-out.
func (b *batcher) deliver(c *call) {
	f := c.fan
	v, err := f.parse(c.cmd)
	resent := c.resent
	b.freeCall(c)
	f.ch <- Reply{M: b.m, Val: v, Err: err, Resent: resent}
	f.release()
}

// send runs one command line on its own, if the master may receive it (see
// Master.Admit), and keeps its answer only if it can be trusted (see
// Master.Trust). A server that does not know the script (restart, SCRIPT
// FLUSH) gets it whole, which caches it there.
func (b *batcher) send(ctx context.Context, s *Script, line []any) (*redis.Cmd, bool) {
	a, err := b.m.Admit(ctx)
	if err != nil {
		return failed(ctx, err), false
	}
	cmd := b.process(ctx, s, line)
	ok, resent := b.m.Trust(ctx, a)
	if !ok {
		return failed(ctx, ErrReconnected), resent
	}
	return cmd, resent
}

func (b *batcher) process(ctx context.Context, s *Script, line []any) *redis.Cmd {
	cmd := evalCmd(ctx, line)
	_ = b.m.RDB.Process(ctx, cmd)
	if noScript(cmd.Err()) {
		cmd = evalCmd(ctx, s.evalLine(line))
		_ = b.m.RDB.Process(ctx, cmd)
	}
	b.m.corrupt(cmd, line)
	return cmd
}

// failed is a command that carries err as its answer.
func failed(ctx context.Context, err error) *redis.Cmd {
	cmd := redis.NewCmd(ctx)
	cmd.SetErr(err)
	return cmd
}

// noScript tells the server's answer that it does not know a script. (The
// nil check first: redis.HasErrorPrefix allocates even for nil.)
func noScript(err error) bool {
	return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT")
}

// evalCmd makes the command for an EVAL or EVALSHA line, routed (in a
// Cluster) by its first key.
func evalCmd(ctx context.Context, line []any) *redis.Cmd {
	cmd := redis.NewCmd(ctx, line...)
	if line[2] != 0 {
		cmd.SetFirstKeyPos(3)
	}
	return cmd
}

// exec sends a batch as one pipeline and hands every call but the leader's
// (the caller running exec, if any) its answer. Calls whose script the
// server does not know are sent again one by one.
func (b *batcher) exec(batch []*call, leader *call) {
	ctx := b.life
	if len(batch) == 1 {
		c := batch[0]
		c.cmd, c.resent = b.send(ctx, c.s, c.line)
	} else if a, err := b.m.Admit(ctx); err != nil {
		for _, c := range batch {
			c.cmd = failed(ctx, err)
		}
	} else {
		scripts := make([]*Script, len(batch))
		lines := make([][]any, len(batch))
		for i, c := range batch {
			scripts[i], lines[i] = c.s, c.line
		}
		// not chunked: the calls of many goroutines rarely run the same
		// script back to back (an acquire, then a release); chunked, the
		// lock benchmark (A at 16 goroutines, B on 3 and 5 masters) gave
		// 0.54x the floor and 1.55x / 1.93x redsync against 0.57x and
		// 1.63x / 2.12x unchunked, in one window
		for i, cmd := range b.m.runLines(ctx, scripts, lines, false) {
			c := batch[i]
			c.cmd = cmd
			b.m.corrupt(c.cmd, c.line)
		}
		ok, resent := b.m.Trust(ctx, a)
		for _, c := range batch {
			c.resent = resent
			if !ok {
				c.cmd = failed(ctx, ErrReconnected)
			}
		}
	}
	for _, c := range batch {
		switch {
		case c == leader:
		case c.fan != nil:
			b.deliver(c)
		default:
			c.done <- false
		}
	}
}
