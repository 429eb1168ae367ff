package jobs

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/scheduler"
)

// Review of max_runs (issue 14): exactly max_runs scheduled ticks are
// dispatched, whatever becomes of a dispatch's reply.

// Schedule (max_runs: 2):
//
//  1. tick 1 is dispatched: count 1.
//  2. tick 2 is counted (count 2) and its task enqueued, but the enqueue's
//     reply is lost (the link to the queue Redis is cut mid-command): the
//     Dispatcher sees an error that is not "task ID conflict" and takes the
//     count back (count 1), though the task is in the queue and will run.
//  3. tick 3 is dispatched (the next tick; or the policy's pick after the
//     queue outage, which records tick 2 missed): counted 2, enqueued.
//  4. the scheduler's retry of tick 2 (if any) is answered ErrJobDone.
//
// Three ticks are in the queue for a job with max_runs: 2.
func TestReviewMaxRunsLostEnqueueReplyIsNotCountedBack(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(t, `  - name: twice
    schedule: "@every 1m"
    max_runs: 2
    handler: {name: twice}
`)
	p := redistest.NewTestProxy(t, e.srv.Addr())
	client := asynq.NewClient(asynq.RedisClientOpt{Addr: p.Addr()})
	defer client.Close()
	d := NewDispatcher(cfg, client, nil, WithQueueRedis(e.rdb), WithLogger(testLogger(t)))
	ctx := context.Background()
	t1, t2, t3 := tickOf("twice", 1), tickOf("twice", 2), tickOf("twice", 3)
	queue := cfg.QueueName("default")

	if err := d.Dispatch(ctx, t1); err != nil {
		t.Fatal(err)
	}
	// the reply to tick 2's enqueue is lost with its connection
	if err := p.CloseAfter(0, false); err != nil {
		t.Fatal(err)
	}
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err := d.Dispatch(dctx, t2)
	cancel()
	if err == nil || errors.Is(err, scheduler.ErrAlreadyDispatched) {
		t.Fatalf("dispatch with the reply lost: %v, want an error", err)
	}
	t.Logf("tick 2's dispatch: %v", err)
	if err := p.Restore(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.insp.GetTaskInfo(queue, t2.ID()); err != nil {
		t.Fatalf("tick 2's task is not in the queue (the schedule needs it there): %v", err)
	}

	err3 := d.Dispatch(ctx, t3)
	err2 := d.Dispatch(ctx, t2) // the scheduler's retry of tick 2
	t.Logf("tick 3: %v; tick 2 again: %v", err3, err2)

	var queued []string
	for _, tk := range []scheduler.Tick{t1, t2, t3} {
		if _, err := e.insp.GetTaskInfo(queue, tk.ID()); err == nil {
			queued = append(queued, tk.ID())
		}
	}
	if len(queued) > 2 {
		n, _ := e.rdb.Get(ctx, RunCountKeys("baton", "twice")[0]).Int()
		t.Errorf("max_runs 2, but %d ticks are in the queue: %v (count %d); a count taken back after an "+
			"enqueue whose reply was lost lets a later tick take the slot of a tick that runs", len(queued), queued, n)
	}
}

// Schedule (max_runs: 5): 20 distinct ticks dispatched at once (a catch-up
// of "all" on several replicas), and each of them by two owners at once (an
// owner that took over a tick whose first owner died before committing).
// Exactly 5 ticks are enqueued and counted; the others are ErrJobDone; a
// tick counted is never refused to its second owner. (Held.)
func TestReviewMaxRunsConcurrentDispatchesNearTheLimit(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(t, `  - name: five
    schedule: "@every 1s"
    max_runs: 5
    handler: {name: five}
`)
	d := NewDispatcher(cfg, e.client, nil, WithQueueRedis(e.rdb))
	d2 := NewDispatcher(cfg, e.client, nil, WithQueueRedis(e.rdb))
	// ticks a second apart: all within the counted ticks' window (the
	// job's retention), as ticks claimed within the starting deadline are
	sec := func(n int) scheduler.Tick {
		tk := tickOf("five", 0)
		tk.At = tk.At.Add(time.Duration(n) * time.Second)
		return tk
	}
	type result struct {
		tick int
		err  error
	}
	results := make(chan result, 40)
	for m := 1; m <= 20; m++ {
		for _, disp := range []*Dispatcher{d, d2} {
			go func() { results <- result{m, disp.Dispatch(context.Background(), sec(m))} }()
		}
	}
	outcome := map[int][]error{}
	for range 40 {
		r := <-results
		outcome[r.tick] = append(outcome[r.tick], r.err)
	}
	queue := cfg.QueueName("default")
	enqueued := 0
	for m := 1; m <= 20; m++ {
		_, err := e.insp.GetTaskInfo(queue, sec(m).ID())
		in := err == nil
		if in {
			enqueued++
		}
		for _, err := range outcome[m] {
			done := errors.Is(err, scheduler.ErrJobDone)
			switch {
			case in && done:
				t.Errorf("tick %d is enqueued, but an owner was told the job is done (its owners: %v)", m, outcome[m])
			case !in && !done:
				t.Errorf("tick %d is not enqueued, and an owner was told %v (its owners: %v)", m, err, outcome[m])
			}
		}
	}
	n, err := e.rdb.Get(context.Background(), RunCountKeys("baton", "five")[0]).Int()
	if enqueued != 5 || err != nil || n != 5 {
		t.Errorf("%d ticks enqueued, count %d (%v), want 5 and 5", enqueued, n, err)
	}
}
