package jobs

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// ErrTooManyTasks is returned by QueuedTaskOf for a queue too long to read
// through.
var ErrTooManyTasks = errors.New("jobs: too many tasks to look through")

// QueuedTaskOf returns the ID of a task in asynq queue (pending, active,
// scheduled or retrying) whose job is in jobs, or "" when there is none. It
// reads at most limit task IDs per state: a longer list is ErrTooManyTasks.
func QueuedTaskOf(ctx context.Context, rdb redis.UniversalClient, queue string, jobs map[string]bool, limit int64) (string, error) {
	base := "asynq:{" + queue + "}:"
	lists := []string{"pending", "active"}
	sets := []string{"scheduled", "retry"}
	pipe := rdb.Pipeline()
	var lens []*redis.IntCmd
	for _, l := range lists {
		lens = append(lens, pipe.LLen(ctx, base+l))
	}
	for _, z := range sets {
		lens = append(lens, pipe.ZCard(ctx, base+z))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return "", fmt.Errorf("jobs: queue %s: %w", queue, err)
	}
	states := []string{"pending", "active", "scheduled", "retry"}
	for i, n := range lens {
		if n.Val() > limit {
			return "", fmt.Errorf("%w: queue %s has %d %s", ErrTooManyTasks, queue, n.Val(), states[i])
		}
	}
	pipe = rdb.Pipeline()
	var ids []*redis.StringSliceCmd
	for _, l := range lists {
		ids = append(ids, pipe.LRange(ctx, base+l, 0, -1))
	}
	for _, z := range sets {
		ids = append(ids, pipe.ZRange(ctx, base+z, 0, -1))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return "", fmt.Errorf("jobs: queue %s: %w", queue, err)
	}
	for _, c := range ids {
		for _, id := range c.Val() {
			if job, _, ok := strings.Cut(id, "@"); ok && jobs[job] {
				return id, nil
			}
		}
	}
	return "", nil
}
