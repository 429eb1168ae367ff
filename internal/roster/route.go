package roster

// Who runs what during a rolling deploy: one rule, Runs, asked by the
// three places that route a task while replicas run different job lists.
//
//   - hand-back: a worker that cannot run a task asks which live replicas
//     can (Roster.Runners), and hands the task back to them or archives it;
//   - queue binding: a dispatcher binds a tick to one queue while live
//     replicas route its job differently (Roster.RoutedDifferently);
//   - reload: a replaced replica stops once no queue holds a task that only
//     it runs (Drained, with OnlyRuns).

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/config"
)

// Runs is the routing rule: a worker whose job list is list and that
// consumes queues runs a queued task of job from queue q when its list has
// the job in cron mode and it consumes q. A task no live worker runs is
// archived; one that another live worker runs is handed back to it.
func Runs(list map[string]ListedJob, queues []string, job, q string) bool {
	j, ok := list[job]
	return ok && j.Mode == config.ModeCron && slices.Contains(queues, q)
}

// Runners returns the ids of the live replicas other than this one whose
// workers run a task of job from queue q (Runs), read fresh: a replica that
// just started with the job must not be missed. undecided is true when none
// does and the roster's liveness verdicts are suspended (the queue Redis's
// clock stepped): nobody is taken as dead until every live replica has
// beaten under the new clock, StepSuspend at most.
func (r *Roster) Runners(ctx context.Context, job, q string) (ids []string, undecided bool, err error) {
	rctx, cancel := context.WithTimeout(ctx, CallBound)
	defer cancel()
	members, stepped, err := r.read(rctx)
	if err != nil {
		return nil, false, err
	}
	for i := range members {
		if m := &members[i]; m.Live && m.key != r.self.key && m.runs(job, q) {
			ids = append(ids, m.ID)
		}
	}
	return ids, len(ids) == 0 && (stepped || Stale(members)), nil
}

// RoutedDifferently reports whether, as of the last heartbeat, a live
// replica has job in another mode or queue than this one.
func (r *Roster) RoutedDifferently(job string) bool {
	mine, ok := r.list[job]
	if !ok {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range r.last {
		if j, ok := m.Jobs[job]; ok && m.Live && (j.Mode != mine.Mode || j.Queue != mine.Queue) {
			return true
		}
	}
	return false
}

// OnlyRuns returns, by asynq queue, the jobs whose tasks a worker of cfg
// runs from that queue and a worker of next, beside it, would hand back
// (Runs says next does not run them). Every cron job counts when next uses
// another Redis, namespace or signing keys. Queues with none are left out.
func OnlyRuns(cfg, next *config.Config) map[string]map[string]bool {
	same := reflect.DeepEqual(cfg.Redis, next.Redis) && reflect.DeepEqual(cfg.Security, next.Security) && cfg.Namespace == next.Namespace
	nextList, nextQueues := ListJobs(next), slices.Sorted(maps.Keys(next.Worker.Queues))
	out := map[string]map[string]bool{}
	for q := range cfg.Worker.Queues {
		for i := range cfg.Jobs {
			j := &cfg.Jobs[i]
			if j.Mode != config.ModeCron || (same && Runs(nextList, nextQueues, j.Name, q)) {
				continue
			}
			if out[cfg.QueueName(q)] == nil {
				out[cfg.QueueName(q)] = map[string]bool{}
			}
			out[cfg.QueueName(q)][j.Name] = true
		}
	}
	return out
}

// Drained tells whether a worker of cfg that a replica of next replaces
// has nothing queued that only it runs: it returns why not ("queue Q
// holds T, of a job only it runs"), or "" when it may stop.
func Drained(ctx context.Context, rdb redis.UniversalClient, cfg, next *config.Config) (string, error) {
	only := OnlyRuns(cfg, next)
	for _, q := range slices.Sorted(maps.Keys(only)) {
		id, err := QueuedTaskOf(ctx, rdb, q, only[q], drainScan)
		if err != nil {
			return "", err
		}
		if id != "" {
			return fmt.Sprintf("queue %s holds %s, of a job only it runs", q, id), nil
		}
	}
	return "", nil
}

// drainScan is how many tasks of each list of a queue Drained looks
// through.
const drainScan = 10000

// ErrTooManyTasks is returned by QueuedTaskOf for a queue too long to read
// through.
var ErrTooManyTasks = errors.New("jobs: too many tasks to look through")

// QueuedTaskOf returns the ID of a task in asynq queue (pending, active,
// scheduled or retrying) whose job is in jobs, or "" when there is none.
// The four lists are read in one transaction (asynq moves a task between
// them in one script, so it is always in exactly one of them), at most
// limit IDs each: a longer list is ErrTooManyTasks.
func QueuedTaskOf(ctx context.Context, rdb redis.UniversalClient, queue string, jobs map[string]bool, limit int64) (string, error) {
	states := []string{"pending", "active", "scheduled", "retry"}
	k := asynqStateKeys(queue)
	var ids []*redis.StringSliceCmd
	_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		ids = append(ids, p.LRange(ctx, k[0], 0, limit), p.LRange(ctx, k[1], 0, limit),
			p.ZRange(ctx, k[2], 0, limit), p.ZRange(ctx, k[3], 0, limit))
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("jobs: queue %s: %w", queue, err)
	}
	for i, c := range ids {
		if int64(len(c.Val())) > limit {
			return "", fmt.Errorf("%w: queue %s has more than %d %s", ErrTooManyTasks, queue, limit, states[i])
		}
		for _, id := range c.Val() {
			if job, _, ok := strings.Cut(id, "@"); ok && jobs[job] {
				return id, nil
			}
		}
	}
	return "", nil
}
