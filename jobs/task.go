package jobs

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

// taskTypeRun is the asynq task type of a cron-mode run.
const taskTypeRun = "baton:run"

// noTimeout is the asynq task timeout given to a job without a timeout (0):
// about ten years, effectively none. A task always gets an explicit timeout,
// because asynq cancels a task that has neither a timeout nor a deadline after
// 30 minutes.
const noTimeout = 10 * 365 * 24 * time.Hour

// taskPayload is the JSON payload of a taskTypeRun task: the tick it runs, as
// the scheduler dispatched it. With signing keys it ends in a "sig" member
// (see sign.go). Fence is informational: a worker takes every fence it
// hands a run from the lock masters, never from a payload.
type taskPayload struct {
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
	// later (taskExpiry; signed with the rest, so a copy put back into a
	// queue later is refused). 0: none (an older dispatcher, or a job
	// without a timeout), and the worker bounds the task by its tick.
	Exp int64 `json:"exp,omitempty"`
}

// payloadOf returns t's payload.
func payloadOf(t scheduler.Tick) taskPayload {
	return taskPayload{
		V:        formats.TaskPayload,
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
func (p taskPayload) tick() (scheduler.Tick, error) {
	if p.Job == "" {
		return scheduler.Tick{}, errors.New("no job")
	}
	at, err := time.Parse(time.RFC3339, p.Tick)
	if err != nil {
		return scheduler.Tick{}, fmt.Errorf("tick: %w", err)
	}
	return scheduler.Tick{Job: p.Job, At: at.UTC(), RunID: p.RunID, Fence: p.Fence, Replica: p.Replica, Manual: p.Manual, Backfill: p.Backfill}, nil
}

// taskNamespace returns the namespace a taskTypeRun task's payload names
// ("" if none or unreadable).
func taskNamespace(t *asynq.Task) string {
	var p struct {
		Namespace string `json:"ns"`
	}
	_ = json.Unmarshal(t.Payload(), &p)
	return p.Namespace
}

// parseTask decodes a taskTypeRun task into the tick it runs.
func parseTask(t *asynq.Task) (scheduler.Tick, error) {
	if t.Type() != taskTypeRun {
		return scheduler.Tick{}, fmt.Errorf("jobs: task type %q is not %q", t.Type(), taskTypeRun)
	}
	return parsePayload(t.Payload())
}

// payloadExpiry returns the expiry a taskTypeRun payload names (unix ms; 0
// if none).
func payloadExpiry(b []byte) int64 {
	var p struct {
		Exp int64 `json:"exp"`
	}
	_ = json.Unmarshal(b, &p)
	return max(p.Exp, 0)
}

// payloadQueue returns the queue a taskTypeRun payload names ("" if none).
func payloadQueue(b []byte) string {
	var p struct {
		Queue string `json:"q"`
	}
	_ = json.Unmarshal(b, &p)
	return p.Queue
}

// parsePayload decodes a taskTypeRun payload into the tick it runs.
func parsePayload(b []byte) (scheduler.Tick, error) {
	var p taskPayload
	if err := json.Unmarshal(b, &p); err != nil {
		return scheduler.Tick{}, fmt.Errorf("jobs: bad %s payload: %w", taskTypeRun, err)
	}
	tick, err := p.tick()
	if err != nil {
		return scheduler.Tick{}, fmt.Errorf("jobs: bad %s payload: %w", taskTypeRun, err)
	}
	return tick, nil
}

// newRunTask returns the asynq task that runs tick t of cron-mode job j,
// its payload signed when cfg.Security has keys, with its options:
//
//   - TaskID(t.ID()): a tick can be enqueued once; a second enqueue fails with
//     asynq.ErrTaskIDConflict while the task exists (see Retention);
//   - Queue(cfg.QueueName(j.Queue)): the queue carries the namespace;
//   - Timeout(j.Timeout) rounded up to whole seconds (asynq counts seconds, and
//     would drop a sub-second timeout), noTimeout for 0; for a buffering job
//     (buffer_one, buffer_all) times its buffer bound + 1, as a kept tick's
//     task waits behind the run in progress and the ticks kept before it,
//     each bounded by the job's timeout (its own run still is);
//   - MaxRetry(j.MaxRetry + 1): one more than the job allows, because asynq
//     archives a task whose retries are used up before it looks at why it
//     failed, and a task handed back (ErrHandedBack, no attempt spent) must
//     not be archived; the worker enforces the job's max_retry itself;
//   - Retention(cfg.Retention(j)): the completed task, and with it its ID, is
//     kept as long as some replica could still try to dispatch the tick.
//
// The payload carries the task's expiry (taskExpiry): a worker refuses it
// after that, so a copy put back into a queue after the retained task
// expired cannot run the tick again.
func newRunTask(cfg *config.Config, j *config.Job, t scheduler.Tick) (*asynq.Task, error) {
	return newRunTaskAt(cfg, j, t, time.Now())
}

// newRunTaskAt is newRunTask for a dispatch at now (its expiry counts from
// there).
func newRunTaskAt(cfg *config.Config, j *config.Job, t scheduler.Tick, now time.Time) (*asynq.Task, error) {
	p := payloadOf(t)
	p.Namespace = cfg.Namespace
	p.Queue = cfg.QueueName(j.Queue)
	p.Exp = taskExpiry(cfg, j, t, now)
	payload, err := json.Marshal(p)
	if err != nil { // unreachable: plain fields
		return nil, fmt.Errorf("jobs: encode %s: %w", t.ID(), err)
	}
	payload = newSigner(cfg.Security).sign(domainTask, payload)
	return asynq.NewTask(taskTypeRun, payload,
		asynq.TaskID(t.ID()),
		asynq.Queue(p.Queue),
		asynq.Timeout(min(taskTimeout(j.Timeout)*time.Duration(j.BufferBound()+1), noTimeout)),
		asynq.MaxRetry(j.MaxRetry+1),
		asynq.Retention(cfg.Retention(j)),
	), nil
}

// taskTimeout is the asynq timeout for a job timeout d.
func taskTimeout(d time.Duration) time.Duration {
	if d <= 0 {
		return noTimeout
	}
	return (d + time.Second - 1).Truncate(time.Second)
}
