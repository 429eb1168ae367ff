package jobs

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

// OnlyRuns returns, by asynq queue, the jobs whose tasks a worker of cfg
// runs from that queue and a worker of next, beside it, would hand back
// (the roster's rule, as cannotRun applies it: next runs a task when its
// list has the job in cron mode and it consumes the queue). Every cron job
// counts when next uses another Redis, namespace or signing keys. Queues
// with none are left out.
func OnlyRuns(cfg, next *config.Config) map[string]map[string]bool {
	same := reflect.DeepEqual(cfg.Redis, next.Redis) && reflect.DeepEqual(cfg.Security, next.Security) && cfg.Namespace == next.Namespace
	nextWorker := Member{Jobs: listJobs(next), Queues: slices.Sorted(maps.Keys(next.Worker.Queues))}
	out := map[string]map[string]bool{}
	for q := range cfg.Worker.Queues {
		for i := range cfg.Jobs {
			j := &cfg.Jobs[i]
			if j.Mode != config.ModeCron || (same && nextWorker.runs(j.Name, q)) {
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

// ErrTooManyTasks is returned by QueuedTaskOf for a queue too long to read
// through.
var ErrTooManyTasks = errors.New("jobs: too many tasks to look through")

// QueuedTaskOf returns the ID of a task in asynq queue (pending, active,
// scheduled or retrying) whose job is in jobs, or "" when there is none.
// The four lists are read in one transaction (asynq moves a task between
// them in one script, so it is always in exactly one of them), at most
// limit IDs each: a longer list is ErrTooManyTasks.
func QueuedTaskOf(ctx context.Context, rdb redis.UniversalClient, queue string, jobs map[string]bool, limit int64) (string, error) {
	base := "asynq:{" + queue + "}:"
	states := []string{"pending", "active", "scheduled", "retry"}
	var ids []*redis.StringSliceCmd
	_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		ids = append(ids, p.LRange(ctx, base+"pending", 0, limit), p.LRange(ctx, base+"active", 0, limit),
			p.ZRange(ctx, base+"scheduled", 0, limit), p.ZRange(ctx, base+"retry", 0, limit))
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
