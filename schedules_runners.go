package baton

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/nearest"
	"github.com/batonhq/baton/internal/redact"
	"github.com/batonhq/baton/internal/roster"
)

// Who can run a runtime schedule: a live replica whose worker consumes its
// queue and registers its Go handler or allows its URL (roster.Runs, the
// rule the workers route its tasks by). A put that no live replica can run
// is refused, unless put ahead of a deploy; a listing shows such a
// schedule as waiting, and its ticks are refused (recorded, counted as
// failing) until a replica that can run it starts.

// ErrNoRunner is returned for a runtime schedule put that no live replica
// can run (a mistyped handler, a handler or URL prefix only the next
// deploy brings), unless put with AheadOfDeploy. While no replica runs at
// all nothing is refused: the schedule put says it waits.
var ErrNoRunner = errors.New("baton: no live replica can run it")

// PutOption changes how a runtime schedule is put.
type PutOption func(*putOptions)

type putOptions struct {
	ahead bool
}

// AheadOfDeploy puts a runtime schedule that no live replica can run yet
// (its Go handler or URL prefix comes with the next deploy) instead of
// failing with ErrNoRunner. Until a replica that can run it starts, its
// ticks are refused (recorded in its history, counted as failing in the
// status) and listings show it waiting (Schedule.Waiting).
func AheadOfDeploy() PutOption { return func(o *putOptions) { o.ahead = true } }

// runnerMissing says why no live replica among members runs job from its
// queue; "" when one does.
func runnerMissing(job *config.Job, members []roster.Member) string {
	task := roster.TaskOf(job)
	var live, onQueue int
	var handlers []string
	for i := range members {
		m := &members[i]
		if !m.Live {
			continue
		}
		live++
		if roster.Runs(m, task, job.Queue) {
			return ""
		}
		if slices.Contains(m.Queues, job.Queue) {
			onQueue++
			handlers = append(handlers, m.Handlers...)
		}
	}
	switch {
	case live == 0:
		return "no replica is running (the roster has no live replica)"
	case onQueue == 0:
		return fmt.Sprintf("no live replica's worker consumes queue %q", job.Queue)
	case task.Handler != "":
		slices.Sort(handlers)
		handlers = slices.Compact(handlers)
		why := fmt.Sprintf("no live replica registers Go handler %q", task.Handler)
		if near := nearest.Name(task.Handler, handlers); near != "" {
			return why + fmt.Sprintf(" (did you mean %q?)", near)
		}
		if len(handlers) == 0 {
			return why + " (they register none)"
		}
		return why + " (they register " + quoteList(handlers, 10) + ")"
	default:
		u, _, _ := strings.Cut(task.URL, "?") // a query may carry a token
		return fmt.Sprintf("no live replica allows URL %q (its schedules.http_prefixes)", job.MaskSecrets(redact.URL(u)))
	}
}

// quoteList is names quoted and joined, the first n of them and how many
// more.
func quoteList(names []string, n int) string {
	q := make([]string, 0, min(len(names), n))
	for _, s := range names[:min(len(names), n)] {
		q = append(q, fmt.Sprintf("%q", s))
	}
	out := strings.Join(q, ", ")
	if len(names) > n {
		out += fmt.Sprintf(" and %d more", len(names)-n)
	}
	return out
}

// checkRunner refuses, with ErrNoRunner, a put of job (runtime schedule
// id) that no live replica runs, unless o says to put it ahead of a
// deploy. With no live replica at all there is nothing to check against
// (the first replica may be the program putting it, before its first
// heartbeat): the put goes through. It returns why no live replica can
// run it ("": one can), for the schedule put.
func (c *Cluster) checkRunner(ctx context.Context, id string, job *config.Job, o putOptions) (string, error) {
	members, err := roster.Read(ctx, c.queue, c.cfg.Namespace)
	if err != nil {
		return "", fmt.Errorf("baton: runtime schedule %q: checking that a live replica can run it: %w", id, err)
	}
	why := runnerMissing(job, members)
	if why == "" || o.ahead || !slices.ContainsFunc(members, func(m roster.Member) bool { return m.Live }) {
		return why, nil
	}
	return why, fmt.Errorf("%w: runtime schedule %q: %s; fix the definition, or put it ahead of the deploy that brings what it needs (baton schedules put --force, PUT ?force=true, baton.AheadOfDeploy())", ErrNoRunner, id, why)
}
