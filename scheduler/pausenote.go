package scheduler

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/batonhq/baton/internal/formats"
)

// pauseReadTimeout bounds the read of a paused job's pause flag for its
// ticks' records.
const pauseReadTimeout = time.Second

// pauseFlag is what the history needs of a pause flag's JSON value
// (formats.PauseFlag; written by baton's Cluster.Pause).
type pauseFlag struct {
	V       int    `json:"v"`
	By      string `json:"by"`
	Note    string `json:"note"`
	UntilMS int64  `json:"until_ms"`
}

// pauseReason is why job's ticks are recorded paused: who paused it, until
// when (a pause that ends by itself) and the note, from its pause flag on
// the first lock master that holds one; a job paused in its configuration
// says so. A flag that cannot be read (masters failing, a newer format)
// leaves "the job is paused".
func (s *Scheduler) pauseReason(ctx context.Context, job *Job) string {
	const base = "the job is paused"
	if job.Paused {
		return base + " (paused: true in the job list)"
	}
	ctx, cancel := context.WithTimeout(ctx, pauseReadTimeout)
	defer cancel()
	key := PauseKey(s.opts.namespace, job.Name)
	for _, m := range s.masters {
		v, err := m.Get(ctx, key).Bytes()
		if err != nil {
			continue
		}
		var f pauseFlag
		if formats.VersionOf(v) > formats.PauseFlag || json.Unmarshal(v, &f) != nil {
			return base
		}
		return describePause(f)
	}
	return base
}

// describePause is the reason of a tick recorded paused under flag f.
func describePause(f pauseFlag) string {
	var b strings.Builder
	b.WriteString("the job is paused")
	if f.By != "" {
		fmt.Fprintf(&b, " by %s", f.By)
	}
	if f.UntilMS > 0 {
		fmt.Fprintf(&b, " until %s (the pause ends by itself)", time.UnixMilli(f.UntilMS).UTC().Format(time.RFC3339Nano))
	}
	if f.Note != "" {
		b.WriteString(": " + f.Note)
	}
	return b.String()
}
