package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/formats"
	"github.com/batonhq/baton/internal/handoff"
	"github.com/batonhq/baton/internal/redact"
	"github.com/batonhq/baton/internal/schedstore"
)

// This file holds the replace request: how a run of a replace-policy job
// asks the job's older runs, on every worker, to stop; and the stop
// request, how a runtime schedule's deletion stops its runs (RequestStop).
//
// Redis names (on the queue Redis):
//
//	NS:cancel:<job>              pub/sub channel of replace and stop
//	                             requests, JSON {id, tick, replica, stop},
//	                             signed when the config's security section
//	                             says so; a worker subscribes to those of the
//	                             config's replace-policy jobs and, by the
//	                             pattern NS:cancel:@*, to every runtime
//	                             schedule's

// ErrScheduleDeleted ends a run of a runtime schedule that was deleted
// with its runs stopped (a stop request, RequestStop, saying "deleted").
// The run is recorded as stopped and not retried.
var ErrScheduleDeleted = errors.New("worker: stopped: its runtime schedule was deleted")

// ErrStopped ends a run that a stop request asked to stop for another
// reason than a deletion. Recorded as stopped, not retried.
var ErrStopped = errors.New("worker: stopped on request")

// stoppedOnRequest reports whether err ends a run a stop request stopped.
func stoppedOnRequest(err error) bool {
	return errors.Is(err, ErrScheduleDeleted) || errors.Is(err, ErrStopped)
}

// stopCause is the cause a stop request's why cancels runs with.
func stopCause(why string) error {
	if why == "deleted" {
		return ErrScheduleDeleted
	}
	return fmt.Errorf("%w: %s", ErrStopped, redact.Quote(why))
}

// cancelRequest is a message on NS:cancel:<job>.
type cancelRequest struct {
	V       int    `json:"v"`    // format version, formats.CancelRequest (absent: 1)
	ID      string `json:"id"`   // the requester's tick ID
	Tick    string `json:"tick"` // the requester's tick, RFC 3339, UTC
	Replica string `json:"replica"`
	// Stop, when set, asks to stop every run of the job, whatever its
	// tick, and says why ("deleted": its runtime schedule was deleted).
	Stop string `json:"stop,omitempty"`
}

// RequestStop asks every worker running job (a runtime schedule's) to stop
// its runs, because why: a signed request on the job's replace channel,
// which every worker follows for runtime schedules. Pub/sub delivers at
// most once: a worker that is reconnecting misses it.
func RequestStop(ctx context.Context, rdb redis.UniversalClient, cfg *config.Config, job, why, by string) error {
	return requestStopAt(ctx, rdb, cfg, job, why, by, time.Now())
}

// requestStopAt is RequestStop made at the instant at.
func requestStopAt(ctx context.Context, rdb redis.UniversalClient, cfg *config.Config, job, why, by string, at time.Time) error {
	msg, err := json.Marshal(cancelRequest{V: formats.CancelRequest, ID: "stop", Tick: at.UTC().Format(time.RFC3339Nano), Replica: by, Stop: why})
	if err != nil {
		return err
	}
	ch := cancelChannel(cfg.Namespace, job)
	msg = handoff.NewSigner(cfg.Security).Sign(handoff.DomainCancel+"\x00"+ch, msg)
	if err := rdb.Publish(ctx, ch, msg).Err(); err != nil {
		return fmt.Errorf("job %q: ask its runs to stop: %w", job, err)
	}
	return nil
}

// signer signs and checks replace requests.
func (e *engine) signer() *handoff.Signer {
	if e.cfg == nil {
		return nil
	}
	return handoff.NewSigner(e.cfg.Security)
}

// onCancelRequest handles a replace or stop request. A replace request:
// every run of the job on this worker whose tick is older than the
// requester's is cancelled with ErrReplaced; a run of the same or a newer
// tick is left alone, so an older tick never replaces a newer one. A stop
// request (a runtime schedule's only): every run of the job whose tick is
// before the request was made (within the max clock skew) is cancelled
// with stopCause; a request made more than stopMemory ago is ignored.
func (e *engine) onCancelRequest(job string, payload string) {
	body, err := []byte(payload), error(nil)
	if g := e.signer(); g.Enabled() {
		body, err = g.Verify(handoff.DomainCancel+"\x00"+cancelChannel(e.cfg.Namespace, job), body)
	}
	if err != nil {
		if _, logged := e.badCancel.LoadOrStore(job+"\x00"+err.Error(), true); !logged {
			e.log.Error("ignoring a replace request (logged once per job and reason)", slog.String("job", job), slog.Any("error", err))
		}
		return
	}
	if err := formats.Check("replace request", formats.CancelRequest, formats.VersionOf(body)); err != nil {
		// what a later release asks may mean something else: its runs
		// are stopped by no request, and a replacing run waits for the lease
		formats.Warn(e.log, err.(*formats.NewerError), "ignored: no run is stopped by it")
		return
	}
	var req cancelRequest
	if err := json.Unmarshal(body, &req); err != nil {
		e.log.Warn("bad replace request", slog.String("job", job), slog.Any("error", err))
		return
	}
	if req.Stop != "" {
		if !config.IsScheduleJob(job) {
			e.log.Warn("ignoring a stop request for a job of the job list (only a runtime schedule's runs are stopped so)", slog.String("job", job))
			return
		}
		// a request older than stopMemory is a copy put back (a replay by
		// one who can publish, or one held up): the runs under way now may
		// be of a schedule put again since, which it must not stop
		made, err := time.Parse(time.RFC3339Nano, req.Tick)
		skew := e.cfg.MaxClockSkew
		if err != nil || time.Since(made) > stopMemory+skew {
			if _, logged := e.badCancel.LoadOrStore(job+"\x00stale", true); !logged {
				e.log.Warn("ignoring a stop request made too long ago (logged once per job)", slog.String("job", job),
					slog.String("made", redact.Quote(req.Tick)), slog.String("by_replica", redact.Quote(req.Replica)))
			}
			return
		}
		cause := stopCause(req.Stop)
		if errors.Is(cause, ErrScheduleDeleted) {
			e.rememberDeleted(job)
		}
		// runs of later ticks than the request are of a schedule put again
		if n := e.cancelRuns(cause, func(j string, ar *activeRun) bool { return j == job && ar.at.Before(made.Add(skew)) }); n > 0 {
			e.log.Info("stopping runs on request", slog.String("job", job), slog.String("why", cause.Error()),
				slog.String("by_replica", req.Replica), slog.Int("runs", n))
		}
		return
	}
	at, err := time.Parse(time.RFC3339, req.Tick)
	if err != nil {
		e.log.Warn("bad replace request", slog.String("job", job), slog.Any("error", err))
		return
	}
	if config.IsScheduleJob(job) {
		// every runtime schedule's channel is followed: only a replace
		// job's older runs are replaced
		if j, ok := e.cfg.Job(job); !ok || j.Concurrency != config.ConcurrencyReplace {
			return
		}
	}
	n := e.cancelRuns(ErrReplaced, func(j string, ar *activeRun) bool { return j == job && ar.at.Before(at) })
	if n > 0 {
		e.log.Info("replacing older runs", slog.String("job", job), slog.String("by", req.ID),
			slog.String("by_replica", req.Replica), slog.Int("runs", n))
	}
}

// subscribeReplaceRequests subscribes to the replace requests of the
// config's replace-policy jobs and, unless the worker is local-only, to the
// replace and stop requests of every runtime schedule (a pattern: schedule
// ids have no glob characters), on one pub/sub connection to the queue
// Redis, and handles them (onCancelRequest) until stopSubscriber. It fails
// if the subscription is not confirmed within 10s.
func (w *Worker) subscribeReplaceRequests(ctx context.Context) error {
	var channels []string
	for i := range w.cfg.Jobs {
		j := &w.cfg.Jobs[i]
		if _, replaces := concurrencyOf(w.policies[j.Name]).(replacePolicy); replaces && (j.Mode == config.ModeCron || j.Mode == config.ModeLocal) {
			channels = append(channels, cancelChannel(w.cfg.Namespace, j.Name))
		}
	}
	var pattern string
	if !w.localOnly {
		pattern = cancelChannel(w.cfg.Namespace, config.ScheduleJobName("*"))
	}
	if len(channels) == 0 && pattern == "" {
		return nil
	}
	ps, err := w.subscribe(ctx, channels, pattern)
	if err != nil && pattern != "" && strings.Contains(err.Error(), "NOPERM") {
		// a Redis user whose ACL predates runtime schedules: the worker
		// runs, without their stop and replace requests
		w.log.Warn("the Redis user may not PSUBSCRIBE "+pattern+": runtime schedules' stop and replace requests do not reach this worker; add &"+pattern+" to the user's ACL (docs/operating.md)",
			slog.Any("error", err))
		if len(channels) == 0 {
			return nil
		}
		ps, err = w.subscribe(ctx, channels, "")
	}
	if err != nil {
		return err
	}
	prefix := cancelChannel(w.cfg.Namespace, "")
	w.ps, w.subDone = ps, make(chan struct{})
	msgs := ps.Channel()
	go func() {
		defer close(w.subDone)
		for m := range msgs {
			w.onCancelRequest(strings.TrimPrefix(m.Channel, prefix), m.Payload)
		}
	}()
	return nil
}

// subscribe subscribes to channels and pattern (either may be empty) on
// one connection and waits for the last confirmation; requests that come
// before it are handled.
func (w *Worker) subscribe(ctx context.Context, channels []string, pattern string) (*redis.PubSub, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// confirmations come in the order asked: the last one confirms all
	var ps *redis.PubSub
	var last redis.Subscription
	if len(channels) > 0 {
		ps = w.rdb.Subscribe(ctx, channels...)
		last = redis.Subscription{Kind: "subscribe", Channel: channels[len(channels)-1]}
	}
	if pattern != "" {
		if ps == nil {
			ps = w.rdb.PSubscribe(ctx, pattern)
		} else if err := ps.PSubscribe(ctx, pattern); err != nil {
			ps.Close()
			return nil, fmt.Errorf("subscribe to stop requests: %w", err)
		}
		last = redis.Subscription{Kind: "psubscribe", Channel: pattern}
	}
	prefix := cancelChannel(w.cfg.Namespace, "")
	for {
		msg, err := ps.Receive(ctx)
		if err != nil {
			ps.Close()
			return nil, fmt.Errorf("subscribe to replace requests: %w", err)
		}
		if s, ok := msg.(*redis.Subscription); ok && s.Kind == last.Kind && s.Channel == last.Channel {
			return ps, nil
		}
		if m, ok := msg.(*redis.Message); ok {
			w.onCancelRequest(strings.TrimPrefix(m.Channel, prefix), m.Payload)
		}
	}
}

// stopSubscriber ends the subscription to replace requests, if any, and
// waits for its handler to return.
func (w *Worker) stopSubscriber(context.Context) error {
	if w.ps == nil {
		return nil
	}
	w.ps.Close()
	<-w.subDone
	w.ps = nil
	return nil
}

// stopMemory is how long a worker remembers a stop request for a deleted
// runtime schedule: longer than replicas take to follow the delete (a
// second, or schedules.resync when the push is missed, is the fallback a
// run may still start through).
const stopMemory = time.Minute

// rememberDeleted records that a stop request for job, a runtime schedule
// deleted with its runs stopped, arrived now: a run of it that had not
// registered yet (its task admitted while the request came, or fetched
// before this replica followed the delete) must not start.
func (e *engine) rememberDeleted(job string) {
	now := time.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.deleted == nil {
		e.deleted = map[string]time.Time{}
	}
	if len(e.deleted) >= 1024 {
		for j, at := range e.deleted {
			if now.Sub(at) > stopMemory {
				delete(e.deleted, j)
			}
		}
	}
	e.deleted[job] = now
}

// deletedSchedule reports whether job is a runtime schedule that a stop
// request said was deleted, within stopMemory, and that is still absent
// from the store (it was not put again since).
func (e *engine) deletedSchedule(ctx context.Context, job string) bool {
	e.mu.Lock()
	at, ok := e.deleted[job]
	if ok && time.Since(at) > stopMemory {
		delete(e.deleted, job)
		ok = false
	}
	e.mu.Unlock()
	if !ok || e.rdb == nil {
		return false
	}
	id, _ := config.ScheduleID(job)
	_, err := schedstore.Of(e.rdb, e.cfg).Get(ctx, id)
	return errors.Is(err, schedstore.ErrNotFound)
}
