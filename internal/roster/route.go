package roster

// Who runs what during a rolling deploy: one rule, Runs, asked by the
// three places that route a task while replicas run different job lists.
//
//   - hand-back: a worker that cannot run a task asks which live replicas
//     can (Roster.Runners), and hands the task back to them or archives it;
//   - queue binding: a dispatcher binds a tick to one queue while live
//     replicas route its job differently (Roster.RoutedDifferently);
//   - reload: a replaced replica stops once no queue holds a task that only
//     it runs (Drained, with OnlyRuns).

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"reflect"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/config"
)

// Task is a queued task as the routing rule sees it: its job and, for a
// runtime schedule (whose job is in no job list), what running it takes.
type Task struct {
	// Job is the job's name.
	Job string
	// Handler is the Go handler a runtime schedule's handler job calls.
	Handler string
	// URL is the URL a runtime schedule's http job calls.
	URL string
}

// TaskOf returns a task of job as the routing rule sees it.
func TaskOf(job *config.Job) Task {
	t := Task{Job: job.Name}
	if job.Handler != nil {
		t.Handler = job.Handler.Name
	}
	if job.HTTP != nil {
		t.URL = job.HTTP.URL
	}
	return t
}

// Runs is the routing rule: worker m runs a queued task t from queue q
// when it consumes q and
//
//   - for a job of the job list: its list has the job in cron mode;
//   - for a runtime schedule: its process registers the job's Go handler,
//     or its schedules.http_prefixes allow the job's URL.
//
// A task no live worker runs is archived; one that another live worker
// runs is handed back to it. A worker whose roster entry is of a newer
// format than this release reads (Member.Newer) may run any task: what it
// runs is unknown, and a task is never archived while it might.
func Runs(m *Member, t Task, q string) bool {
	if m.Newer > 0 {
		return true
	}
	if !slices.Contains(m.Queues, q) {
		return false
	}
	if config.IsScheduleJob(t.Job) {
		return t.Handler != "" && slices.Contains(m.Handlers, t.Handler) ||
			t.URL != "" && AllowsURL(m.HTTPPrefixes, t.URL)
	}
	j, ok := m.Jobs[t.Job]
	return ok && j.Mode == config.ModeCron
}

// Runners returns the ids of the live replicas other than this one whose
// workers run task t from queue q (Runs), read fresh: a replica that just
// started with the job must not be missed. undecided is true when none
// does and the roster's liveness verdicts are suspended (the queue Redis's
// clock stepped): nobody is taken as dead until every live replica has
// beaten under the new clock, StepSuspend at most.
func (r *Roster) Runners(ctx context.Context, t Task, q string) (ids []string, undecided bool, err error) {
	rctx, cancel := context.WithTimeout(ctx, CallBound)
	defer cancel()
	members, stepped, err := r.read(rctx)
	if err != nil {
		return nil, false, err
	}
	for i := range members {
		if m := &members[i]; m.Live && m.key != r.self.key && m.runs(t, q) {
			ids = append(ids, m.ID)
		}
	}
	return ids, len(ids) == 0 && (stepped || Stale(members)), nil
}

// RoutedDifferently reports whether, as of the last heartbeat, a live
// replica has job in another mode or queue than this one.
func (r *Roster) RoutedDifferently(job string) bool {
	mine, ok := r.list[job]
	if !ok {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range r.last {
		if j, ok := m.Jobs[job]; ok && m.Live && (j.Mode != mine.Mode || j.Queue != mine.Queue) {
			return true
		}
	}
	return false
}

// OnlyRuns returns, by asynq queue, the jobs whose tasks a worker of cfg
// runs from that queue and a worker of next, beside it, would hand back
// (Runs says next does not run them). Every cron job counts when next uses
// another Redis, namespace or signing keys. Queues with none are left out.
func OnlyRuns(cfg, next *config.Config) map[string]map[string]bool {
	same := reflect.DeepEqual(cfg.Redis, next.Redis) && reflect.DeepEqual(cfg.Security, next.Security) && cfg.Namespace == next.Namespace
	nextWorker := &Member{Jobs: ListJobs(next), Queues: slices.Sorted(maps.Keys(next.Worker.Queues))}
	out := map[string]map[string]bool{}
	for q := range cfg.Worker.Queues {
		for i := range cfg.Jobs {
			j := &cfg.Jobs[i]
			if j.Mode != config.ModeCron || (same && Runs(nextWorker, Task{Job: j.Name}, q)) {
				continue
			}
			name := cfg.QueueFor(q, j.Name)
			if out[name] == nil {
				out[name] = map[string]bool{}
			}
			out[name][j.Name] = true
		}
	}
	return out
}

// Drained tells whether a worker of cfg that a replica of next replaces
// has nothing queued that only it runs: it returns why not ("queue Q
// holds T, of a job only it runs"), or "" when it may stop.
func Drained(ctx context.Context, rdb redis.UniversalClient, cfg, next *config.Config) (string, error) {
	only := OnlyRuns(cfg, next)
	for _, q := range slices.Sorted(maps.Keys(only)) {
		id, err := QueuedTaskOf(ctx, rdb, q, only[q], drainScan)
		if err != nil {
			return "", err
		}
		if id != "" {
			return fmt.Sprintf("queue %s holds %s, of a job only it runs", q, id), nil
		}
	}
	return "", nil
}

// drainScan is how many tasks of each list of a queue Drained looks
// through.
const drainScan = 10000

// ErrTooManyTasks is returned by QueuedTaskOf for a queue too long to read
// through.
var ErrTooManyTasks = errors.New("roster: too many tasks to look through")

// QueuedTaskOf returns the ID of a task in asynq queue (pending, active,
// scheduled or retrying) whose job is in jobs, or "" when there is none.
// The four lists are read in one transaction (asynq moves a task between
// them in one script, so it is always in exactly one of them), at most
// limit IDs each: a longer list is ErrTooManyTasks.
func QueuedTaskOf(ctx context.Context, rdb redis.UniversalClient, queue string, jobs map[string]bool, limit int64) (string, error) {
	states := []string{"pending", "active", "scheduled", "retry"}
	k := asynqStateKeys(queue)
	var ids []*redis.StringSliceCmd
	_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		ids = append(ids, p.LRange(ctx, k[0], 0, limit), p.LRange(ctx, k[1], 0, limit),
			p.ZRange(ctx, k[2], 0, limit), p.ZRange(ctx, k[3], 0, limit))
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("roster: queue %s: %w", queue, err)
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

// PrefixDigests returns the digests of URL prefixes (schedules.http_prefixes)
// that the roster publishes in place of the prefixes: one per prefix, of its
// scheme, host and path in a canonical form, so that AllowsURL can tell
// whether a URL lies under one of them.
func PrefixDigests(prefixes []string) []string {
	var out []string
	for _, pre := range prefixes {
		u, err := url.Parse(pre)
		if err != nil || u.Scheme == "" || u.Host == "" {
			continue
		}
		p := u.Path
		if p == "" {
			p = "/"
		}
		out = append(out, urlDigest(u.Scheme, u.Host, p))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// AllowsURL reports whether raw lies under a prefix of digests
// (PrefixDigests) as schedules.http_prefixes allows a URL: same scheme and
// host, and a path that is the prefix's, or starts with it at a '/'. A URL
// the config refuses whatever its prefixes (user info, a "." or ".."
// segment, an escaped '/', '.' or '\') lies under none.
func AllowsURL(digests []string, raw string) bool {
	if len(digests) == 0 {
		return false
	}
	u, err := url.Parse(raw)
	if err != nil || u.User != nil || u.Scheme == "" || u.Host == "" {
		return false
	}
	esc := strings.ToLower(u.EscapedPath())
	if strings.Contains(esc, "%2f") || strings.Contains(esc, "%2e") || strings.Contains(esc, "%5c") || strings.Contains(u.Path, `\`) {
		return false
	}
	for _, seg := range strings.Split(u.Path, "/") {
		if seg == "." || seg == ".." {
			return false
		}
	}
	has := func(p string) bool {
		return slices.Contains(digests, urlDigest(u.Scheme, u.Host, p))
	}
	// the prefixes that allow path P: "/" (or none), P itself, and each
	// start of P that ends at a '/', with and without that '/'
	if has("/") || u.Path != "" && has(u.Path) {
		return true
	}
	for i := 1; i < len(u.Path); i++ {
		if u.Path[i] == '/' && (has(u.Path[:i]) || has(u.Path[:i+1])) {
			return true
		}
	}
	return false
}

// urlDigest is the digest of one prefix: its scheme and host lower-cased
// (they compare without case) and its path.
func urlDigest(scheme, host, path string) string {
	sum := sha256.Sum256([]byte(strings.ToLower(scheme) + "://" + strings.ToLower(host) + path))
	return hex.EncodeToString(sum[:8])
}
