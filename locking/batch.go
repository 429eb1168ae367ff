package locking

import (
	"context"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// batcher coalesces the script calls that many goroutines make to one master
// into pipelines. An idle master gets each call at once, from the caller's
// own goroutine; while a pipeline is in flight, new calls queue, and when it
// returns the oldest queued caller leads the next pipeline with everything
// that queued meanwhile. Under load this turns N round trips (and 2N
// syscalls on each side) into one, which is most of the cost of a lock on a
// busy machine; alone it adds nothing.
type batcher struct {
	rdb  redis.UniversalClient
	life context.Context // the client's: a batch is not cut short by one caller's ctx

	mu    sync.Mutex
	busy  bool
	queue []*call
}

type call struct {
	script *redis.Script
	keys   []string
	args   []any
	cmd    *redis.Cmd
	done   chan bool // true: lead the next batch; false: cmd holds the answer
}

// run executes script on the master, batched with concurrent calls.
func (b *batcher) run(ctx context.Context, script *redis.Script, keys []string, args ...any) *redis.Cmd {
	c := &call{script: script, keys: keys, args: args}
	b.mu.Lock()
	if !b.busy {
		b.busy = true
		b.mu.Unlock()
		c.cmd = script.Run(ctx, b.rdb, keys, args...)
		b.next()
		return c.cmd
	}
	c.done = make(chan bool, 1)
	b.queue = append(b.queue, c)
	b.mu.Unlock()
	if lead := <-c.done; lead {
		b.mu.Lock()
		batch := b.queue
		b.queue = nil
		b.mu.Unlock()
		b.exec(batch)
		b.next()
	}
	return c.cmd
}

// next hands the master to the oldest queued call, or marks it idle.
func (b *batcher) next() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.queue) == 0 {
		b.busy = false
		return
	}
	b.queue[0].done <- true
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
