package jobs

import (
	"encoding/json"
	"log/slog"
	"time"
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
}

// signer signs and checks replace requests.
func (e *engine) signer() *signer {
	if e.cfg == nil {
		return nil
	}
	return newSigner(e.cfg.Security)
}

func (e *engine) cancelChannel(job string) string {
	return e.cfg.Namespace + ":cancel:" + job
}

// onCancelRequest handles a replace request: every run of the job on this
// worker whose tick is older than the requester's is cancelled with
// ErrReplaced. A run of the same or a newer tick is left alone, so an older
// tick never replaces a newer one.
func (e *engine) onCancelRequest(job string, payload string) {
	body, err := []byte(payload), error(nil)
	if g := e.signer(); g.enabled() {
		body, err = g.verify(domainCancel+"\x00"+e.cancelChannel(job), body)
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
