package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/formats"
	"github.com/batonhq/baton/internal/handoff"
)

// This file holds the replace request: how a run of a replace-policy job
// asks the job's older runs, on every worker, to stop.
//
// Redis names (on the queue Redis):
//
//	NS:cancel:<job>              pub/sub channel of replace requests, JSON
//	                             {id, tick, replica}, signed when the
//	                             config's security section says so

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
	msg, err := json.Marshal(cancelRequest{V: formats.CancelRequest, ID: "stop", Tick: time.Now().UTC().Format(time.RFC3339Nano), Replica: by, Stop: why})
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

// onCancelRequest handles a replace request: every run of the job on this
// worker whose tick is older than the requester's is cancelled with
// ErrReplaced. A run of the same or a newer tick is left alone, so an older
// tick never replaces a newer one.
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
	var req cancelRequest
	if err := json.Unmarshal(body, &req); err != nil {
		e.log.Warn("bad replace request", slog.String("job", job), slog.Any("error", err))
		return
	}
	at, err := time.Parse(time.RFC3339, req.Tick)
	if err != nil {
		e.log.Warn("bad replace request", slog.String("job", job), slog.Any("error", err))
		return
	}
	n := e.cancelRuns(ErrReplaced, func(j string, ar *activeRun) bool { return j == job && ar.at.Before(at) })
	if n > 0 {
		e.log.Info("replacing older runs", slog.String("job", job), slog.String("by", req.ID),
			slog.String("by_replica", req.Replica), slog.Int("runs", n))
	}
}

// subscribeReplaceRequests subscribes to the replace requests of the
// config's replace-policy jobs (one pub/sub connection on the queue Redis)
// and handles them (onCancelRequest) until stopSubscriber. It fails if the
// subscription is not confirmed within 10s.
func (w *Worker) subscribeReplaceRequests() error {
	var channels []string
	jobOf := map[string]string{}
	for i := range w.cfg.Jobs {
		j := &w.cfg.Jobs[i]
		if _, replaces := w.policies[j.Name].(replacePolicy); replaces && (j.Mode == config.ModeCron || j.Mode == config.ModeLocal) {
			ch := cancelChannel(w.cfg.Namespace, j.Name)
			channels = append(channels, ch)
			jobOf[ch] = j.Name
		}
	}
	if len(channels) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ps := w.rdb.Subscribe(ctx, channels...)
	if _, err := ps.Receive(ctx); err != nil {
		ps.Close()
		return fmt.Errorf("jobs: worker: subscribe to replace requests: %w", err)
	}
	w.ps, w.subDone = ps, make(chan struct{})
	msgs := ps.Channel()
	go func() {
		defer close(w.subDone)
		for m := range msgs {
			w.onCancelRequest(jobOf[m.Channel], m.Payload)
		}
	}()
	return nil
}

// stopSubscriber ends the subscription to replace requests, if any, and
// waits for its handler to return.
func (w *Worker) stopSubscriber() {
	if w.ps == nil {
		return
	}
	w.ps.Close()
	<-w.subDone
	w.ps = nil
}
