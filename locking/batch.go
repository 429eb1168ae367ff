package locking

import (
	"context"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// batcher coalesces the script calls that many goroutines make to one master
// into pipelines. While fewer than maxInFlight calls or pipelines are under
// way, a call goes out at once from the caller's own goroutine; beyond that,
// calls queue, and when a pipeline returns the oldest queued caller leads the
// next one with everything that queued meanwhile. Under load this turns N
// round trips (and 2N syscalls on each side) into a few, which is most of the
// cost of a lock on a busy machine; alone it adds nothing.
type batcher struct {
	rdb  redis.UniversalClient
	life context.Context // the client's: a batch is not cut short by one caller's ctx

	mu    sync.Mutex
	busy  int // calls or pipelines under way
	queue []*call
}

// maxInFlight is how many calls or pipelines may be under way at once on one
// master before calls queue. One gives the biggest batches; in the lock
// benchmark (16 goroutines, 3 and 5 masters) 4 lost a third of the
// throughput that 1 reaches.
const maxInFlight = 1

type call struct {
	script *redis.Script
	keys   []string
	args   []any
	cmd    *redis.Cmd
	done   chan bool // true: lead the next batch; false: cmd holds the answer
	batch  []*call   // set with done <- true: the calls to send, this one first
}

// run executes script on the master, batched with concurrent calls.
func (b *batcher) run(ctx context.Context, script *redis.Script, keys []string, args ...any) *redis.Cmd {
	c := &call{script: script, keys: keys, args: args}
	b.mu.Lock()
	if b.busy < maxInFlight {
		b.busy++
		b.mu.Unlock()
		c.cmd = script.Run(ctx, b.rdb, keys, args...)
		b.next()
		return c.cmd
	}
	c.done = make(chan bool, 1)
	b.queue = append(b.queue, c)
	b.mu.Unlock()
	if lead := <-c.done; lead {
		b.exec(c.batch)
		b.next()
	}
	return c.cmd
}

// next hands the finished slot to the oldest queued call, or frees it.
func (b *batcher) next() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.queue) == 0 {
		b.busy--
		return
	}
	lead := b.queue[0]
	lead.batch, b.queue = b.queue, nil
	lead.done <- true
}

// exec sends a batch as one pipeline and hands every other caller its answer.
// Calls whose script the server does not know (restart, SCRIPT FLUSH) are
// sent again one by one, which loads the script.
func (b *batcher) exec(batch []*call) {
	ctx := b.life
	if len(batch) == 1 {
		c := batch[0]
		c.cmd = c.script.Run(ctx, b.rdb, c.keys, c.args...)
		return
	}
	pipe := b.rdb.Pipeline()
	for _, c := range batch {
		c.cmd = pipe.EvalSha(ctx, c.script.Hash(), c.keys, c.args...)
	}
	_, _ = pipe.Exec(ctx) // each cmd carries its own error
	for _, c := range batch {
		if err := c.cmd.Err(); err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			c.cmd = c.script.Run(ctx, b.rdb, c.keys, c.args...)
		}
	}
	for _, c := range batch[1:] { // batch[0] is the leader: it has its answer
		c.done <- false
	}
}
