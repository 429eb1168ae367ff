package handoff

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/encoding/protowire"
)

// errTaskIDConflict is the enqueuer's answer for a task whose ID its queue
// holds already (asynq.ErrTaskIDConflict, wrapped, so callers test for
// asynq's error alone).
var errTaskIDConflict = fmt.Errorf("handoff: %w", asynq.ErrTaskIDConflict)

var (
	//go:embed lua/enqueue.lua
	enqueueSrc    string
	enqueueScript = redis.NewScript(enqueueSrc)
)

// enqueueChunk is the most tasks of one queue one enqueue script call
// carries.
const enqueueChunk = 128

// enqueuer puts baton's tasks into asynq's queues with its own script
// (lua/enqueue.lua), which writes what asynq's client would: the tasks that
// many goroutines enqueue at once (the ticks of one instant) go as one
// script call per queue and chunk, not one each. While an enqueue is under
// way, the next ones queue; when it returns, the oldest waiting caller
// sends everything that queued meanwhile. Alone, an enqueue goes at once.
type enqueuer struct {
	rdb redis.UniversalClient
	now func() time.Time

	mu      sync.Mutex
	busy    bool
	waiting []*enqueueCall
}

// enqueueCall is one task waiting to be sent, and its answer.
type enqueueCall struct {
	ctx   context.Context
	task  taskMessage
	err   error
	done  chan bool // true: lead the next batch (in batch); false: err holds the answer
	batch []*enqueueCall
}

func newEnqueuer(rdb redis.UniversalClient) *enqueuer {
	return &enqueuer{rdb: rdb, now: time.Now}
}

// enqueue puts task into its queue. It returns an error wrapping
// asynq.ErrTaskIDConflict when the queue holds a task with its ID.
// Cancelling ctx abandons the wait for a batch; a batch under way is not
// cut short by one caller.
func (e *enqueuer) enqueue(ctx context.Context, task taskMessage) error {
	c := &enqueueCall{ctx: ctx, task: task, done: make(chan bool, 1)}
	e.mu.Lock()
	if !e.busy {
		e.busy = true
		e.mu.Unlock()
		c.batch = []*enqueueCall{c}
		return e.answer(c, true)
	}
	e.waiting = append(e.waiting, c)
	e.mu.Unlock()
	select {
	case lead := <-c.done:
		return e.answer(c, lead)
	case <-ctx.Done():
	}
	e.mu.Lock()
	if i := slices.Index(e.waiting, c); i >= 0 {
		e.waiting = slices.Delete(e.waiting, i, i+1)
		e.mu.Unlock()
		return fmt.Errorf("handoff: enqueue %s: %w", task.id, ctx.Err())
	}
	e.mu.Unlock()
	// taken into a batch already: its answer comes (as its leader, it
	// sends the batch)
	return e.answer(c, <-c.done)
}

// answer is c's error once its batch was sent: by c itself when it leads
// (lead), which then passes the turn on.
func (e *enqueuer) answer(c *enqueueCall, lead bool) error {
	if lead {
		e.send(c.batch)
		e.next()
	}
	return c.err
}

// next passes the turn to the oldest waiting caller with everything that
// queued, or ends the turn.
func (e *enqueuer) next() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.waiting) == 0 {
		e.busy = false
		return
	}
	batch := e.waiting
	e.waiting = nil
	batch[0].batch = batch
	batch[0].done <- true
}

// send enqueues the calls of batch (every queue's in chunks, in one
// pipeline) and answers every caller but the leader (batch[0]).
func (e *enqueuer) send(batch []*enqueueCall) {
	defer func() {
		for _, c := range batch[1:] {
			c.done <- false
		}
	}()
	// the round trip is bounded by the latest deadline of the batch's
	// callers (none if one has none), never by one caller's: a caller whose
	// own context ended meanwhile gets the batch's answer, and its task may
	// be enqueued (as for a timed-out enqueue: the tick's ID dedupes a retry)
	ctx := context.Background()
	var latest time.Time
	for _, c := range batch {
		dl, ok := c.ctx.Deadline()
		if !ok {
			latest = time.Time{}
			break
		}
		if dl.After(latest) {
			latest = dl
		}
	}
	if !latest.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, latest)
		defer cancel()
	}
	byQueue := map[string][]*enqueueCall{}
	var order []string
	for _, c := range batch {
		q := c.task.queue
		if _, ok := byQueue[q]; !ok {
			order = append(order, q)
		}
		byQueue[q] = append(byQueue[q], c)
	}
	type chunk struct {
		calls []*enqueueCall
		keys  []string
		args  []any
		cmd   *redis.Cmd
	}
	var chunks []chunk
	pipe := e.rdb.Pipeline()
	since := e.now().UnixNano()
	published := map[string]*redis.IntCmd{}
	for _, q := range order {
		// in asynq's set of queues, as asynq's client puts it: with every
		// batch, so a Redis restarted empty has it back at once
		published[q] = pipe.SAdd(ctx, AsynqQueuesKey, q)
		calls := byQueue[q]
		for lo := 0; lo < len(calls); lo += enqueueChunk {
			ch := chunk{calls: calls[lo:min(lo+enqueueChunk, len(calls))]}
			ch.keys = append(make([]string, 0, 1+len(ch.calls)), asynqPendingKey(q))
			ch.args = append(make([]any, 0, 1+2*len(ch.calls)), since)
			for _, c := range ch.calls {
				ch.keys = append(ch.keys, AsynqTaskKey(q, c.task.id))
				ch.args = append(ch.args, c.task.id, c.task.encode())
			}
			ch.cmd = enqueueScript.EvalSha(ctx, pipe, ch.keys, ch.args...)
			chunks = append(chunks, ch)
		}
	}
	_, _ = pipe.Exec(ctx) // each cmd carries its own error
	for _, ch := range chunks {
		cmd := ch.cmd
		if err := cmd.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			cmd = enqueueScript.Eval(ctx, e.rdb, ch.keys, ch.args...)
		}
		vals, err := cmd.Int64Slice()
		if perr := published[ch.calls[0].task.queue].Err(); err == nil && perr != nil {
			err = fmt.Errorf("add queue %q to asynq's queues: %w", ch.calls[0].task.queue, perr)
		}
		if err == nil && len(vals) != len(ch.calls) {
			err = errors.New("handoff: the enqueue script's answer does not list one answer per task")
		}
		for k, c := range ch.calls {
			switch {
			case err != nil:
				c.err = err
			case vals[k] == 0:
				c.err = errTaskIDConflict
			}
		}
	}
}

// taskMessage is what asynq stores of a task (its TaskMessage, asynq v0.26
// internal/proto/asynq.proto): the fields baton's tasks set.
type taskMessage struct {
	typ       string
	payload   []byte
	id        string
	queue     string // asynq's queue name (config.Config.QueueName)
	retry     int    // asynq.MaxRetry
	timeout   int64  // seconds
	retention int64  // seconds
}

// encode is the message in protobuf wire format, as asynq's client encodes
// it (fields in number order, zero values left out).
func (m taskMessage) encode() []byte {
	b := make([]byte, 0, 32+len(m.typ)+len(m.payload)+len(m.id)+len(m.queue))
	str := func(num protowire.Number, v []byte) {
		if len(v) > 0 {
			b = protowire.AppendTag(b, num, protowire.BytesType)
			b = protowire.AppendBytes(b, v)
		}
	}
	num := func(n protowire.Number, v int64) {
		if v != 0 {
			b = protowire.AppendTag(b, n, protowire.VarintType)
			b = protowire.AppendVarint(b, uint64(v))
		}
	}
	str(1, []byte(m.typ))
	str(2, m.payload)
	str(3, []byte(m.id))
	str(4, []byte(m.queue))
	num(5, int64(m.retry))
	num(8, m.timeout)
	num(12, m.retention)
	return b
}

// asynqPendingKey is asynq's key of a queue's pending list (asynq v0.26
// internal/base), beside AsynqTaskKey.
func asynqPendingKey(queue string) string { return "asynq:{" + queue + "}:pending" }
