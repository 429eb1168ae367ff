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
