package handoff

import (
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
)

// Option configures a Sender (New).
type Option func(*Sender)

// WithLogger sets the logger. Default: no logging.
func WithLogger(l *slog.Logger) Option {
	return func(s *Sender) {
		if l != nil {
			s.log = l
		}
	}
}

// WithQueueRedis gives a sender a client of the queue Redis (the one the
// asynq client enqueues into), so it can keep a tick's exactly-once across
// queues: asynq refuses a task ID twice only within one queue, and replicas
// with different job lists (a rolling deploy that moves a job to another
// queue, or from cron to local mode) could otherwise enqueue one tick into
// two queues, or run it locally after it was enqueued. It also writes the
// history's records of manual dispatches and of ticks that did not run,
// and keeps max_runs counts.
func WithQueueRedis(rdb redis.UniversalClient) Option {
	return func(s *Sender) { s.rdb = rdb }
}

// WithMovingJobs tells a sender which jobs live replicas route differently
// (another mode or queue: a rolling deploy in progress; see
// roster.Roster.RoutedDifferently). Their ticks are bound to a queue even
// when asynq knows only one, so a replica that runs the job locally and one
// that enqueues it agree.
func WithMovingJobs(moving func(job string) bool) Option {
	return func(s *Sender) { s.moving = moving }
}

// WithParentsAwait makes the backfilled ticks of the chained jobs in until
// wait for their parents' ticks until the time given (the payload's
// Await): a chain's backfill (Cluster.BackfillChain) dispatches each link
// at once, and each waits in the queue, as a scheduled tick does within
// its starting deadline, for the links before it. Ticks that are not
// backfilled, and jobs run after no other, are not affected.
func WithParentsAwait(until map[string]time.Time) Option {
	return func(s *Sender) { s.await = until }
}
