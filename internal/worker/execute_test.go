package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/worktest"
	"github.com/batonhq/baton/scheduler"
)

// tripLog is a go-redis hook on the worker's own clients that keeps the
// commands of every round trip (a command alone, or a pipeline), and can
// fail the round trips that carry a given command before they are sent.
type tripLog struct {
	mu    sync.Mutex
	trips [][]string // each command as "name key"
	fail  func(cmds []string) bool
}

func cmdLine(c redis.Cmder) string {
	args := c.Args()
	name := strings.ToLower(fmt.Sprint(args[0]))
	switch {
	case (name == "evalsha" || name == "eval") && len(args) > 3:
		return name + " " + fmt.Sprint(args[3])
	case len(args) > 1:
		return name + " " + fmt.Sprint(args[1])
	}
	return name
}

func (l *tripLog) record(cmds []redis.Cmder) error {
	lines := make([]string, len(cmds))
	for i, c := range cmds {
		lines[i] = cmdLine(c)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fail != nil && l.fail(lines) {
		l.fail = nil // once
		return errors.New("round trip failed by the test")
	}
	l.trips = append(l.trips, lines)
	return nil
}

func (l *tripLog) DialHook(next redis.DialHook) redis.DialHook { return next }

func (l *tripLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if err := l.record([]redis.Cmder{cmd}); err != nil {
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}

func (l *tripLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if err := l.record(cmds); err != nil {
			for _, c := range cmds {
				c.SetErr(err)
			}
			return err
		}
		return next(ctx, cmds)
	}
}

// with returns the round trips that carry a command starting with prefix.
func (l *tripLog) with(prefix string) [][]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out [][]string
	for _, tr := range l.trips {
		for _, c := range tr {
			if strings.HasPrefix(c, prefix) {
				out = append(out, tr)
				break
			}
		}
	}
	return out
}

// hookedOpt makes the worker's Redis clients with l as a hook.
type hookedOpt struct {
	asynq.RedisClientOpt
	l *tripLog
}

func (o hookedOpt) MakeRedisClient() any {
	c := o.RedisClientOpt.MakeRedisClient().(*redis.Client)
	c.AddHook(o.l)
	return c
}

// tripTo waits until a round trip carries a command starting with prefix
// and returns the first that does.
func tripTo(t *testing.T, l *tripLog, prefix string) []string {
	t.Helper()
	if !poll.Until(worktest.Wait, func() bool { return len(l.with(prefix)) > 0 }) {
		t.Fatalf("no round trip carried %q", prefix)
	}
	return l.with(prefix)[0]
}

func carries(trip []string, prefix string) bool {
	for _, c := range trip {
		if strings.HasPrefix(c, prefix) {
			return true
		}
	}
	return false
}

// touches reports whether a command of trip is on key.
func touches(trip []string, key string) bool {
	for _, c := range trip {
		if strings.HasSuffix(c, " "+key) {
			return true
		}
	}
	return false
}

const quickJob = `  - name: quick
    schedule: "@every 1m"
    handler: {name: quick}
`

// A run's start records its holder in the round trip of its "started"
// history entry: one round trip to the queue Redis, not two.
func TestRunStartRecordsItsHolderWithItsHistoryEntry(t *testing.T) {
	e := newEnv(t)
	l := &tripLog{}
	cfg := e.Config(t, quickJob)
	exec := newFakeExec(nil)
	e.workerOn(t, hookedOpt{e.Opt, l}, cfg, exec)
	tk := worktest.TickOf("quick", 1)
	e.dispatch(t, cfg, tk)
	e.State(t, "baton:default", tk, asynq.TaskStateCompleted)
	trip := tripTo(t, l, "set "+holderKey("baton", "quick"))
	if !touches(trip, "baton:{history:quick}") {
		t.Errorf("the holder record went in %v, without the run's history entry", trip)
	}
}

// A successful run's end writes its tick's ledger record in the round trip
// of its history entry, and the record is written once.
func TestSuccessfulRunWritesItsLedgerRecordWithItsEnd(t *testing.T) {
	e := newEnv(t)
	l := &tripLog{}
	cfg := e.Config(t, quickJob)
	e.workerOn(t, hookedOpt{e.Opt, l}, cfg, newFakeExec(nil))
	tk := worktest.TickOf("quick", 2)
	e.dispatch(t, cfg, tk)
	e.State(t, "baton:default", tk, asynq.TaskStateCompleted)
	rec := "set " + tickRecordKey("baton", tk)
	trip := tripTo(t, l, rec)
	if !touches(trip, "baton:{history:quick}") {
		t.Errorf("the ledger record went in %v, without the run's history entry", trip)
	}
	if n := len(l.with(rec)); n != 1 {
		t.Errorf("the ledger record was written in %d round trips, want 1", n)
	}
	wantDone(t, e, tk)
}

// When the round trip of a successful run's end fails, the tick's ledger
// record is still written (alone), so a copy of its task put back is
// refused.
func TestLedgerRecordIsWrittenAloneWhenTheEndsRoundTripFails(t *testing.T) {
	e := newEnv(t)
	tk := worktest.TickOf("quick", 3)
	rec := "set " + tickRecordKey("baton", tk)
	l := &tripLog{fail: func(cmds []string) bool { return len(cmds) > 1 && carries(cmds, rec) }}
	cfg := e.Config(t, quickJob)
	e.workerOn(t, hookedOpt{e.Opt, l}, cfg, newFakeExec(nil))
	e.dispatch(t, cfg, tk)
	e.State(t, "baton:default", tk, asynq.TaskStateCompleted)
	wantDone(t, e, tk)
	if trips := l.with(rec); len(trips) != 1 || len(trips[0]) != 1 {
		t.Errorf("ledger record round trips %v, want one alone after the failed end", trips)
	}
}

// Where the queue Redis is the only lock master, a run's end gives its
// execution lease back in the round trip of its history entry (after the
// ledger record), and the lease is free once the run ended.
func TestRunEndReleasesItsLeaseInItsRoundTrip(t *testing.T) {
	e := newEnv(t)
	l := &tripLog{}
	cfg := e.Config(t, quickJob)
	e.workerOn(t, hookedOpt{e.Opt, l}, cfg, newFakeExec(nil), WithQueueAsLockMaster())
	tk := worktest.TickOf("quick", 4)
	e.dispatch(t, cfg, tk)
	e.State(t, "baton:default", tk, asynq.TaskStateCompleted)
	release := "evalsha baton:lock:{exec:quick}"
	trip := tripTo(t, l, release)
	if !touches(trip, "baton:{history:quick}") {
		t.Errorf("the lease's release went in %v, without the run's end", trip)
	}
	rec, rel := -1, -1
	for i, c := range trip {
		switch {
		case strings.HasPrefix(c, "set "+tickRecordKey("baton", tk)):
			rec = i
		case strings.HasPrefix(c, release):
			rel = i
		}
	}
	if rec < 0 || rel < rec {
		t.Errorf("round trip %v: want the ledger record before the lease's release", trip)
	}
	if n := e.RDB.Exists(context.Background(), "baton:lock:{exec:quick}").Val(); n != 0 {
		t.Error("the execution lease is still held after the run ended")
	}
}

// When the round trip of a run's end fails, its execution lease is still
// released at once (on the lock client's own connection), not left to
// expire at its ttl.
func TestLeaseIsReleasedWhenTheEndsRoundTripFails(t *testing.T) {
	e := newEnv(t)
	release := "evalsha baton:lock:{exec:quick}"
	l := &tripLog{fail: func(cmds []string) bool { return carries(cmds, release) }}
	cfg := e.Config(t, quickJob) // lock_ttl 30s: longer than the wait below
	e.workerOn(t, hookedOpt{e.Opt, l}, cfg, newFakeExec(nil), WithQueueAsLockMaster())
	tk := worktest.TickOf("quick", 5)
	e.dispatch(t, cfg, tk)
	e.State(t, "baton:default", tk, asynq.TaskStateCompleted)
	if !poll.Until(worktest.Wait, func() bool {
		return e.RDB.Exists(context.Background(), "baton:lock:{exec:quick}").Val() == 0
	}) {
		t.Fatal("the execution lease is still held after the end's round trip failed")
	}
	wantDone(t, e, tk)
}

// wantDone waits until tick tk's ledger record says done.
func wantDone(t *testing.T, e *env, tk scheduler.Tick) {
	t.Helper()
	if !poll.Until(worktest.Wait, func() bool {
		done, _, _ := readTickRecord(context.Background(), e.RDB, "baton", tk)
		return done
	}) {
		t.Fatal("the tick's ledger record does not say done after its run")
	}
}

// slowTrips is a go-redis hook that delays, by delay, every round trip to
// the queue Redis that carries a command starting with prefix: a late
// reply (a Redis stalled by a fork, a slow link).
type slowTrips struct {
	prefix string
	delay  time.Duration
}

func (s slowTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (s slowTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if strings.HasPrefix(cmdLine(cmd), s.prefix) {
			time.Sleep(s.delay)
		}
		return next(ctx, cmd)
	}
}

func (s slowTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if strings.HasPrefix(cmdLine(c), s.prefix) {
				time.Sleep(s.delay)
				break
			}
		}
		return next(ctx, cmds)
	}
}

type slowOpt struct {
	asynq.RedisClientOpt
	s slowTrips
}

func (o slowOpt) MakeRedisClient() any {
	c := o.RedisClientOpt.MakeRedisClient().(*redis.Client)
	c.AddHook(o.s)
	return c
}

// Schedule: the queue Redis answers the run's first round trip late
// (300 ms: a fork, a slow link). The holder record, which decides whether a
// retry of the same tick that finds the lease busy waits for this run or
// skips its tick (forbid), and what status shows as the holder, must be
// written while the run holds the lease, not given up after the history
// start's 250 ms and left missing until its first refresh at lock_ttl/3.
func TestHolderRecordIsWrittenWhenTheStartsRoundTripIsSlow(t *testing.T) {
	e := newEnv(t)
	cfg := e.Config(t, quickJob) // lock_ttl 30s: the first refresh comes after 10s
	gate := make(chan struct{})
	defer close(gate)
	exec := newFakeExec(blockUntil(gate))
	e.workerOn(t, slowOpt{e.Opt, slowTrips{prefix: "set " + holderKey("baton", "quick"), delay: 300 * time.Millisecond}}, cfg, exec)
	tk := worktest.TickOf("quick", 4)
	e.dispatch(t, cfg, tk)
	select {
	case <-exec.started:
	case <-time.After(worktest.Wait):
		t.Fatal("the run did not start")
	}
	ctx := context.Background()
	if !poll.Until(3*time.Second, func() bool { return e.RDB.Exists(ctx, holderKey("baton", "quick")).Val() == 1 }) {
		t.Fatal("the run holds the job's lease, and 3s after its start no holder record names it")
	}
}
