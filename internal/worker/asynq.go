package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/handoff"
)

// What the worker gives asynq's server: the retry delays, the error
// handler, a logger, and a client whose cancel subscription is moved off
// the channel every asynq server shares.

// retryDelay is the asynq RetryDelayFunc: backoffDelay of the task's job.
func (w *Worker) retryDelay(n int, err error, task *asynq.Task) time.Duration {
	if errors.Is(err, errNotDue) {
		if t, perr := handoff.ParseTask(task); perr == nil {
			return min(max(time.Until(t.At), elsewhereRetry), time.Minute)
		}
	}
	if errors.Is(err, errWaitingForParents) {
		if t, perr := handoff.ParseTask(task); perr == nil {
			since := t.At
			if from, _ := handoff.PayloadAwait(task.Payload()); !from.IsZero() {
				since = from // a chain's backfill: its wait began at the dispatch
			}
			return parentPoll(time.Since(since))
		}
	}
	if errors.Is(err, ErrRunsElsewhere) {
		return elsewhereRetry
	}
	backoff := 10 * time.Second // the job default, for tasks of unknown jobs
	if t, err := handoff.ParseTask(task); err == nil {
		if job, ok := w.cfg.Job(t.Job); ok {
			backoff = job.RetryBackoff
		}
	}
	return handoff.BackoffDelay(backoff, n)
}

// handleError is asynq's ErrorHandler: it logs every failed task with what
// asynq does next. runTick has logged the run's own failures already; this
// line also covers what asynq decides alone (its timeout, its lease).
func (w *Worker) handleError(ctx context.Context, task *asynq.Task, err error) {
	retried, _ := asynq.GetRetryCount(ctx)
	maxRetry, _ := asynq.GetMaxRetry(ctx)
	id, _ := asynq.GetTaskID(ctx)
	if t, perr := handoff.ParseTask(task); perr == nil {
		if job, ok := w.cfg.Job(t.Job); ok && job.Mode == config.ModeCron {
			maxRetry = job.MaxRetry // asynq's is one above, for hand-backs
		}
	}
	next := "retry"
	switch {
	case errors.Is(err, ErrRunsElsewhere):
		next = "hand back"
	case errors.Is(err, ErrReplaced):
		next = "archive (replaced)"
	case stoppedOnRequest(err):
		next = "archive (stopped on request)"
	case errors.Is(err, asynq.SkipRetry):
		next = "archive"
	case retried >= maxRetry:
		next = "archive (retries exhausted)"
	}
	attrs := []any{slog.String("task_id", id), slog.Int("retried", retried), slog.Int("max_retry", maxRetry),
		slog.String("next", next), slog.String("replica", w.replica), slog.Any("error", err)}
	if t, perr := handoff.ParseTask(task); perr == nil {
		attrs = append(handoff.TickAttrs(t)[:4], attrs...) // job, tick, run_id, dispatch fence
	}
	switch {
	case errors.Is(err, ErrRefused):
		w.meantEnds.Store(id, true)
		return // logged by refuse, once per kind
	case errors.Is(err, ErrRunsElsewhere):
		w.log.Debug("task handed back", attrs...)
		return
	case errors.Is(err, ErrReplaced), stoppedOnRequest(err):
		w.meantEnds.Store(id, true)
		w.log.Info("task ended", attrs...)
		return
	}
	w.log.Warn("task failed", attrs...)
}

// asynqLogger adapts slog to asynq's Logger. Fatal logs at error level and
// does not exit (asynq itself never calls it). asynq's "Retry exhausted"
// warning of a task that ended on purpose (meant: replaced, stopped on
// request, refused; handleError, which asynq calls just before, logged
// its end) is a debug line.
type asynqLogger struct {
	l     *slog.Logger
	meant *sync.Map // task id -> true, taken once
}

// retryExhausted starts asynq's warning of an archived task.
const retryExhausted = "Retry exhausted for task id="

func (a asynqLogger) log(level slog.Level, args []any) {
	msg := strings.TrimSpace(fmt.Sprint(args...))
	if id, ok := strings.CutPrefix(msg, retryExhausted); ok && a.meant != nil {
		if _, meant := a.meant.LoadAndDelete(id); meant {
			level = slog.LevelDebug
		}
	}
	if a.l.Enabled(context.Background(), level) {
		a.l.Log(context.Background(), level, msg)
	}
}

func (a asynqLogger) Debug(args ...any) { a.log(slog.LevelDebug, args) }
func (a asynqLogger) Info(args ...any)  { a.log(slog.LevelInfo, args) }
func (a asynqLogger) Warn(args ...any)  { a.log(slog.LevelWarn, args) }
func (a asynqLogger) Error(args ...any) { a.log(slog.LevelError, args) }
func (a asynqLogger) Fatal(args ...any) { a.log(slog.LevelError, args) }

var _ asynq.Logger = asynqLogger{}

// cancelRedirect is the Redis client the worker's asynq server uses, with
// asynq's subscription to its cancel channel (asynq:cancel, shared by every
// deployment on the database, writable without a key) moved to a channel of
// this namespace that nothing publishes on. asynq would otherwise fail a
// task as soon as anyone published its ID there (and retry or archive it
// while its run goes on), and one deployment's cancel would hit another's
// task of the same job@tick. baton stops runs through its own signed
// replace requests.
type cancelRedirect struct {
	redis.UniversalClient
	channel string
}

// Subscribe subscribes to channels, asynq's cancel channel replaced.
func (c cancelRedirect) Subscribe(ctx context.Context, channels ...string) *redis.PubSub {
	out := make([]string, len(channels))
	for i, ch := range channels {
		out[i] = ch
		if ch == asynqCancelChannel {
			out[i] = c.channel
		}
	}
	return c.UniversalClient.Subscribe(ctx, out...)
}
