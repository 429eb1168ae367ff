package handoff

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hibiken/asynq"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/formats"
	"github.com/batonhq/baton/scheduler"
)

// TaskType is the asynq task type of a cron-mode run.
const TaskType = "baton:run"

// NoTimeout is the asynq task timeout given to a job without a timeout (0):
// about ten years, effectively none. A task always gets an explicit timeout,
// because asynq cancels a task that has neither a timeout nor a deadline after
// 30 minutes.
const NoTimeout = 10 * 365 * 24 * time.Hour

// Payload is the JSON payload of a TaskType task: the tick it runs, as
// the scheduler dispatched it. With signing keys it ends in a "sig" member
// (see sign.go). Fence is informational: a worker takes every fence it
// hands a run from the lock masters, never from a payload.
type Payload struct {
	V       int    `json:"v"`       // format version, formats.TaskPayload (absent: 1)
	Job     string `json:"job"`     // the job's name
	Tick    string `json:"tick"`    // the instant the tick was due, RFC 3339, UTC
	RunID   string `json:"run_id"`  // random id of the dispatch
	Fence   int64  `json:"fence"`   // dispatch fencing token
	Replica string `json:"replica"` // the replica that dispatched it
	Manual  bool   `json:"manual"`  // dispatched by a trigger, not by the schedule
	// Backfill: dispatched by a backfill or a resume's replay (signed with
	// the rest; older workers ignore it).
	Backfill bool `json:"backfill,omitempty"`
	// Namespace is the deployment that dispatched it (Config.Namespace).
	Namespace string `json:"ns,omitempty"`
	// Queue is the asynq queue it was enqueued into: signed with the rest,
	// so a copy in another queue (where asynq's ID dedup does not reach) is
	// refused.
	Queue string `json:"q,omitempty"`
	// Exp is when the task expires, unix milliseconds: no attempt starts
	// later (TaskExpiry; signed with the rest, so a copy put back into a
	// queue later is refused). 0: none (an older dispatcher, or a job
	// without a timeout), and the worker bounds the task by its tick.
	Exp int64 `json:"exp,omitempty"`
	// Trace is the W3C trace context of the dispatch's span (traceparent,
	// tracestate), when the dispatcher traces: the run's spans are its
	// children. Signed with the rest; older workers ignore it.
	Trace map[string]string `json:"trace,omitempty"`
	// Def names the runtime schedule definition the tick was dispatched
	// for (config.ScheduleRef: "VERSION-CREATED"; empty for the job
	// list's jobs): a worker runs the tick with that definition, never
	// with another it happens to hold. Signed with the rest; older
	// workers ignore it.
	Def string `json:"def,omitempty"`
	// Await: a backfilled tick of a job run after others
	// (Cluster.BackfillChain) waits for its parents' ticks from its
	// dispatch until then, as a scheduled one waits within its starting
	// deadline. Signed with the rest; a payload with it is of format 2,
	// which an older worker hands back rather than run it at once.
	Await *Await `json:"await,omitempty"`
}

// Await is how long a backfilled tick of a chained job waits for its
// parents' ticks: from its dispatch (From) until Until, unix ms.
type Await struct {
	From  int64 `json:"from"`
	Until int64 `json:"until"`
}

// PayloadAwait returns the wait for its parents a TaskType payload names
// (zero times if none).
func PayloadAwait(b []byte) (from, until time.Time) {
	var p struct {
		Await *Await `json:"await"`
	}
	if json.Unmarshal(b, &p) != nil || p.Await == nil || p.Await.Until <= 0 {
		return time.Time{}, time.Time{}
	}
	return time.UnixMilli(p.Await.From), time.UnixMilli(p.Await.Until)
}

// plainPayload is the format version of a payload without "await": 1,
// which every release reads (formats.TaskPayload is 2 for one with it).
const plainPayload = 1

// PayloadOf returns t's payload.
func PayloadOf(t scheduler.Tick) Payload {
	return Payload{
		V:        plainPayload,
		Job:      t.Job,
		Tick:     t.At.UTC().Format(time.RFC3339Nano), // a manual tick keeps its milliseconds
		RunID:    t.RunID,
		Fence:    t.Fence,
		Replica:  t.Replica,
		Manual:   t.Manual,
		Backfill: t.Backfill,
	}
}

// tick returns the tick the payload describes. It fails if Tick is not RFC
// 3339 or Job is empty.
func (p Payload) tick() (scheduler.Tick, error) {
	if p.Job == "" {
		return scheduler.Tick{}, errors.New("no job")
	}
	at, err := time.Parse(time.RFC3339, p.Tick)
	if err != nil {
		return scheduler.Tick{}, fmt.Errorf("tick: %w", err)
	}
	return scheduler.Tick{Job: p.Job, At: at.UTC(), RunID: p.RunID, Fence: p.Fence, Replica: p.Replica, Manual: p.Manual, Backfill: p.Backfill}, nil
}

// TaskNamespace returns the namespace a TaskType task's payload names
// ("" if none or unreadable).
func TaskNamespace(t *asynq.Task) string {
	var p struct {
		Namespace string `json:"ns"`
	}
	_ = json.Unmarshal(t.Payload(), &p)
	return p.Namespace
}

// ParseTask decodes a TaskType task into the tick it runs.
func ParseTask(t *asynq.Task) (scheduler.Tick, error) {
	if t.Type() != TaskType {
		return scheduler.Tick{}, fmt.Errorf("handoff: task type %q is not %q", t.Type(), TaskType)
	}
	return ParsePayload(t.Payload())
}

// PayloadExpiry returns the expiry a TaskType payload names (unix ms; 0
// if none).
func PayloadExpiry(b []byte) int64 {
	var p struct {
		Exp int64 `json:"exp"`
	}
	_ = json.Unmarshal(b, &p)
	return max(p.Exp, 0)
}

// PayloadTrace returns the trace context a TaskType payload carries (nil
// if none).
func PayloadTrace(b []byte) map[string]string {
	var p struct {
		Trace map[string]string `json:"trace"`
	}
	_ = json.Unmarshal(b, &p)
	return p.Trace
}

// PayloadDef returns the runtime schedule definition a TaskType payload
// was dispatched for (zero if none: a job of the list, or an older
// dispatcher). A "def" member that is not one is an error.
func PayloadDef(b []byte) (config.ScheduleRef, error) {
	var p struct {
		Def string `json:"def"`
	}
	_ = json.Unmarshal(b, &p)
	if p.Def == "" {
		return config.ScheduleRef{}, nil
	}
	return config.ParseScheduleRef(p.Def)
}

// NewerFormatError is a TaskType payload of a format version newer than
// this replica reads (formats.TaskPayload): a newer replica dispatched it,
// and only a replica that reads that version may run it. Tick is what the
// payload says as this replica reads it (for logs and records only).
type NewerFormatError struct {
	Version int
	Tick    scheduler.Tick
}

func (e *NewerFormatError) Error() string {
	return fmt.Sprintf("handoff: a %s payload of format version %d, newer than this replica reads (%d)", TaskType, e.Version, formats.TaskPayload)
}

// PayloadQueue returns the queue a TaskType payload names ("" if none).
func PayloadQueue(b []byte) string {
	var p struct {
		Queue string `json:"q"`
	}
	_ = json.Unmarshal(b, &p)
	return p.Queue
}

// ParsePayload decodes a TaskType payload into the tick it runs.
func ParsePayload(b []byte) (scheduler.Tick, error) {
	var p Payload
	err := json.Unmarshal(b, &p)
	if err == nil && p.V <= formats.TaskPayload {
		tick, err := p.tick()
		if err != nil {
			return scheduler.Tick{}, fmt.Errorf("handoff: bad %s payload: %w", TaskType, err)
		}
		return tick, nil
	}
	// a newer format may change what the other members mean or how they
	// are written (so that they do not decode): its version alone decides
	if v := formats.VersionOf(b); v > formats.TaskPayload {
		tick, _ := p.tick() // as far as it reads, for the logs
		return tick, &NewerFormatError{Version: v, Tick: tick}
	}
	if err == nil {
		err = fmt.Errorf("format version %d", p.V)
	}
	return scheduler.Tick{}, fmt.Errorf("handoff: bad %s payload: %w", TaskType, err)
}

// NewRunTask returns the asynq task that runs tick t of cron-mode job j,
// its payload signed when cfg.Security has keys, with its options:
//
//   - TaskID(t.ID()): a tick can be enqueued once; a second enqueue fails with
//     asynq.ErrTaskIDConflict while the task exists (see Retention);
//   - Queue(cfg.QueueFor(j.Queue, j.Name)): the queue carries the namespace
//     (and the job's lane, with worker.lanes);
//   - Timeout(j.Timeout) rounded up to whole seconds (asynq counts seconds, and
//     would drop a sub-second timeout), NoTimeout for 0; for a buffering job
//     (buffer_one, buffer_all) times its buffer bound + 1, as a kept tick's
//     task waits behind the run in progress and the ticks kept before it,
//     each bounded by the job's timeout (its own run still is); for a job
//     naming a limit plus its starting_deadline, the longest a run waits
//     for a slot before its own timeout starts (attemptTimeout);
//   - MaxRetry(j.MaxRetry + 1): one more than the job allows, because asynq
//     archives a task whose retries are used up before it looks at why it
//     failed, and a task handed back (ErrRunsElsewhere, no attempt spent) must
//     not be archived; the worker enforces the job's max_retry itself;
//   - Retention(cfg.Retention(j)): the completed task, and with it its ID, is
//     kept as long as some replica could still try to dispatch the tick.
//
// The payload carries the task's expiry (TaskExpiry): a worker refuses it
// after that, so a copy put back into a queue after the retained task
// expired cannot run the tick again.
func NewRunTask(cfg *config.Config, j *config.Job, t scheduler.Tick) (*asynq.Task, error) {
	return NewRunTaskAt(cfg, j, t, time.Now())
}

// NewRunTaskAt is NewRunTask for a dispatch at now (its expiry counts from
// there).
func NewRunTaskAt(cfg *config.Config, j *config.Job, t scheduler.Tick, now time.Time) (*asynq.Task, error) {
	return newRunTask(cfg, j, t, now, taskExtras{})
}

// taskExtras are what a task's payload carries beyond its tick: the
// dispatch's trace context (nil: none) and, for a backfilled tick of a
// chained job, until when it waits for its parents (zero: it does not).
type taskExtras struct {
	trace map[string]string
	await time.Time
}

// newRunTask is NewRunTaskAt for a task whose payload carries the trace
// context trace (nil: none).
func newRunTask(cfg *config.Config, j *config.Job, t scheduler.Tick, now time.Time, x taskExtras) (*asynq.Task, error) {
	m, err := runTaskMessage(cfg, j, t, now, x)
	if err != nil {
		return nil, err
	}
	return asynq.NewTask(m.typ, m.payload,
		asynq.TaskID(m.id),
		asynq.Queue(m.queue),
		asynq.Timeout(time.Duration(m.timeout)*time.Second),
		asynq.MaxRetry(m.retry),
		asynq.Retention(time.Duration(m.retention)*time.Second),
	), nil
}

// runTaskMessage is the task of newRunTask as asynq stores it: what the
// hand-off's own enqueue writes (enqueue.go).
func runTaskMessage(cfg *config.Config, j *config.Job, t scheduler.Tick, now time.Time, x taskExtras) (taskMessage, error) {
	p := PayloadOf(t)
	p.Trace = x.trace
	p.Namespace = cfg.Namespace
	p.Queue = cfg.QueueFor(j.Queue, j.Name)
	p.Exp = TaskExpiry(cfg, j, t, now)
	p.Def = j.Ref.String()
	if t.Backfill && len(j.After) > 0 && x.await.After(now) {
		// a worker that reads format 1 would run it at once: it hands
		// the task back for one that reads this format
		p.V, p.Await = formats.TaskPayload, &Await{From: now.UnixMilli(), Until: x.await.UnixMilli()}
		if p.Exp > 0 {
			// its run window starts when its wait ends
			p.Exp = max(p.Exp, x.await.Add(RunWindow(cfg, j)).UnixMilli())
		}
	}
	payload, err := json.Marshal(p)
	if err != nil { // unreachable: plain fields
		return taskMessage{}, fmt.Errorf("handoff: encode %s: %w", t.ID(), err)
	}
	// asynq keeps whole seconds of a timeout and a retention
	timeout := attemptTimeout(j)
	return taskMessage{
		typ:       TaskType,
		payload:   NewSigner(cfg.Security).Sign(DomainTask, payload),
		id:        t.ID(),
		queue:     p.Queue,
		retry:     j.MaxRetry + 1,
		timeout:   int64(timeout.Seconds()),
		retention: int64(cfg.Retention(j).Seconds()),
	}, nil
}

// attemptTimeout is the asynq timeout of an attempt of j's task: the job's
// timeout (TaskTimeout), plus its starting deadline when it names a limit
// (a run waits that long for a slot before it starts, and its own timeout
// counts from its start), times buffer bound + 1 for a buffering job (a
// kept tick's task waits behind the runs in progress and kept before it).
func attemptTimeout(j *config.Job) time.Duration {
	run := TaskTimeout(j.Timeout)
	if run >= NoTimeout {
		return NoTimeout
	}
	if j.Limit != "" {
		run += TaskTimeout(j.StartingDeadline)
	}
	return min(run*time.Duration(j.BufferBound()+1), NoTimeout)
}

// TaskTimeout is the asynq timeout for a job timeout d.
func TaskTimeout(d time.Duration) time.Duration {
	if d <= 0 {
		return NoTimeout
	}
	return (d + time.Second - 1).Truncate(time.Second)
}

// How long a task may live: the window its expiry is signed with, and
// the retry delays it spans.

// AttemptSlack is what an attempt may take beyond its task timeout before
// the next one starts, or before a task fetched late starts at all. After a
// worker died mid-run, asynq recovers its task late: the lease (30 s) runs
// out, the recovery scan takes only tasks whose lease ran out 30 s ago or
// more, and it scans once a minute, so up to 2 minutes; then the retry
// poll, and hand-backs between replicas during a rolling deploy (30 s).
const AttemptSlack = 150 * time.Second

// RunWindow is how long after its dispatch a task's last attempt may still
// start legitimately, for job j:
//
//	2 x max_clock_skew                                       (the dispatcher's and the worker's clocks)
//	+ sum of BackoffDelay(retry_backoff, n), n = 0 .. max_retry-1   (the retry delays)
//	+ (max_retry + 1) x (task timeout + AttemptSlack + worker.shutdown_grace)
//
// where the task timeout is the asynq timeout NewRunTask gives the task
// (attemptTimeout: the job's timeout in whole seconds, plus its
// starting_deadline when it names a limit, times buffer bound + 1 for a
// buffering job). Each attempt may run to its timeout, wait through a
// shutdown's grace (asynq requeues the task without spending an attempt)
// and be picked up late by asynq's recovery; then it fails and the next
// one waits its backoff. A job run after others (after:) adds its
// starting_deadline: its task is handed back, without spending an
// attempt, until its parents' ticks ended, as late as that. A job without
// a timeout has no bound (the ledger record still refuses a replay of a
// tick that ended).
func RunWindow(cfg *config.Config, j *config.Job) time.Duration {
	const never = time.Duration(1<<63 - 1)
	attempt := attemptTimeout(j)
	if attempt >= NoTimeout {
		return never
	}
	d := 2*cfg.MaxClockSkew + time.Duration(j.MaxRetry+1)*(attempt+AttemptSlack+cfg.Worker.ShutdownGrace)
	if len(j.After) > 0 {
		d += j.StartingDeadline // the wait for its parents
	}
	for n := range j.MaxRetry {
		d += BackoffDelay(j.RetryBackoff, n)
		if d > 100*365*24*time.Hour {
			return never
		}
	}
	return d
}

// TickBound is how long after its tick a scheduled task may still start
// (any attempt): the job's starting deadline (the latest dispatch) plus
// RunWindow. A task of an older tick is refused as a replay.
func TickBound(cfg *config.Config, j *config.Job) time.Duration {
	w := RunWindow(cfg, j)
	if w > time.Duration(1<<63-1)-j.StartingDeadline {
		return w
	}
	return j.StartingDeadline + w
}

// OutcomeTTL is how long the outcome record of a tick of job lives
// (internal/chain): as long as an attempt of a tick of a job run after it
// may still start, the longest TickBound of its children (the record is
// written after the tick, and a child's retry looks at it again), plus
// the clock skew bound and scheduler.retention_margin; 0 when no job runs
// after it.
func OutcomeTTL(cfg *config.Config, job string) time.Duration {
	var d time.Duration
	for _, ch := range cfg.Children(job) {
		d = max(d, min(TickBound(cfg, ch), NoTimeout))
	}
	if d == 0 {
		return 0
	}
	return d + 2*cfg.MaxClockSkew + cfg.Scheduler.RetentionMargin
}

// TaskExpiry is the expiry NewRunTask signs into tick t's task dispatched
// at now: the later of the tick and now, plus RunWindow (unix ms; 0: none).
// For a tick dispatched on time it is at most tickBound after the tick; a
// backfill or a trigger, dispatched later than its tick, gets its full
// window from its dispatch.
func TaskExpiry(cfg *config.Config, j *config.Job, t scheduler.Tick, now time.Time) int64 {
	w := RunWindow(cfg, j)
	if w >= 100*365*24*time.Hour {
		return 0
	}
	base := now
	if t.At.After(now) {
		base = t.At
	}
	return base.Add(w).UnixMilli()
}

// maxRetryDelay caps the delay before a retry (unless the job's retry_backoff
// alone is longer).
const maxRetryDelay = time.Hour

// BackoffDelay is the delay before retry n+1 of a job (n retries so far):
// backoff * 2^n, capped at maxRetryDelay or at backoff if that is longer.
// A zero backoff retries at once. asynq moves a due retry back to its queue
// at the worker's next retry poll (see worker.WithPollIntervals), so the actual
// delay is up to that much longer.
func BackoffDelay(backoff time.Duration, n int) time.Duration {
	if backoff <= 0 {
		return 0
	}
	limit := max(backoff, maxRetryDelay)
	d := backoff
	for range max(n, 0) {
		if d >= limit/2 {
			return limit
		}
		d *= 2
	}
	return d
}
