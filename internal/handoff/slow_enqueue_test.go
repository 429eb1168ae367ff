package handoff

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/internal/worktest"
	"github.com/batonhq/baton/scheduler"
)

// Schedule (one tick, two queues, a slow enqueue):
//  1. a rolling deploy moves job "report" from queue old to queue new; both
//     queues exist (asynq:queues lists them);
//  2. the old-list owner of tick T checks the other queues (T is nowhere),
//     then its enqueue into "old" is slow (a congested link to the queue
//     Redis): still in flight when the scheduler's dispatch deadline
//     its tick lease expires (the dispatch's deadline is the lease ttl from the
//     dispatch's start, later than the lease's own end);
//  3. a new-list replica claims T, checks queue "old" (T not there yet) and
//     enqueues T into "new";
//  4. the old owner's enqueue lands in "old".
//
// T is now in two queues: two runs. enqueuedElsewhere is a check-then-act
// across two keys that asynq's enqueue script does not make atomic.
func TestSlowEnqueueStaysInOneQueue(t *testing.T) {
	e := newEnv(t)
	jobOn := func(queue string) *config.Config {
		return e.Config(t, `  - name: report
    schedule: "@every 1m"
    queue: `+queue+`
    handler: {name: report}
`, "{queues: {old: 1, new: 1}}")
	}
	oldCfg, newCfg := jobOn("old"), jobOn("new")
	// both queues known to asynq
	for i, q := range []*config.Config{oldCfg, newCfg} {
		if err := New(q, e.Client, nil).Dispatch(context.Background(), worktest.TickOf("report", 10+i)); err != nil {
			t.Fatal(err)
		}
	}
	slow := e.slowClient(t, 1500*time.Millisecond)
	tick := worktest.TickOf("report", 1)
	oldD := New(oldCfg, slow, nil, WithQueueRedis(e.RDB))
	oldErr := make(chan error, 1)
	go func() {
		// the scheduler bounds a dispatch by the tick lease ttl counted from
		// the dispatch's start, not from the claim: the lease (taken earlier)
		// expires first, and another replica takes the tick over
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		oldErr <- oldD.Dispatch(ctx, tick)
	}()
	time.Sleep(700 * time.Millisecond) // real time: old's tick lease expires by the masters' clocks: the tick goes to another owner
	newD := New(newCfg, e.Client, nil, WithQueueRedis(e.RDB))
	newErr := newD.Dispatch(context.Background(), tick)
	t.Logf("old Dispatch: %v; new Dispatch: %v", <-oldErr, newErr) // old's enqueue has landed
	var in []string
	for _, q := range []string{"baton:old", "baton:new"} {
		if _, err := e.Insp.GetTaskInfo(q, tick.ID()); err == nil {
			in = append(in, q)
		} else if !errors.Is(err, asynq.ErrTaskNotFound) && !errors.Is(err, asynq.ErrQueueNotFound) {
			t.Fatal(err)
		}
	}
	if len(in) > 1 || (len(in) == 1 && newErr != nil && !errors.Is(newErr, scheduler.ErrAlreadyDispatched)) {
		t.Errorf("tick %s enqueued in queues %v: it runs twice", tick.ID(), in)
	}
}

// slowClient is an asynq client of e's Redis whose commands reach it d late
// (a congested link, through the fault proxy).
func (e *env) slowClient(t *testing.T, d time.Duration) *asynq.Client {
	t.Helper()
	p := redistest.NewTestProxy(t, e.Srv.Addr())
	slow := asynq.NewClient(asynq.RedisClientOpt{Addr: p.Addr()})
	t.Cleanup(func() { slow.Close() })
	if err := slow.Ping(); err != nil {
		t.Fatal(err)
	}
	if err := p.AddLatency(d, true); err != nil {
		t.Fatal(err)
	}
	return slow
}
