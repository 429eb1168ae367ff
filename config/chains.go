package config

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/batonhq/baton/schedule"
)

// ParentFailure is what a chained job's tick does when a parent's tick at
// that instant did not succeed (Job.OnParentFailure).
type ParentFailure string

// The parent failure policies.
const (
	// ParentFailureSkip records the tick skipped, naming the parent and
	// its outcome (the default).
	ParentFailureSkip ParentFailure = "skip"
	// ParentFailureRun runs the tick once every parent's tick ended,
	// whatever its outcome.
	ParentFailureRun ParentFailure = "run"
)

// DefaultChainWait is a chained job's default starting_deadline: how long
// after its tick a run may still start, its wait for its parents
// included.
const DefaultChainWait = time.Hour

// chainOnlyKeys are the keys that decide a job's own ticks: a chained job
// has its parents' ticks, so none of them.
var chainOnlyKeys = []string{"schedule", "at", "timezone", "dst", "exclude", "only", "start", "end", "jitter"}

// chainKeys checks the keys of a job with after (or on_parent_failure
// without it), before its schedule is checked: a chained job has no
// schedule of its own, runs through the queue, and waits
// DefaultChainWait by default.
func (v *validator) chainKeys(p string, j *Job, mode Mode) {
	at := func(field string) string { return p + "." + field }
	if len(j.After) == 0 {
		if v.set(at("after")) {
			v.errf(at("after"), "empty: name the jobs this one runs after, or leave it out")
		}
		if v.set(at("on_parent_failure")) {
			v.errf(at("on_parent_failure"), "only with after (what a tick does whose parent's tick failed)")
		}
		return
	}
	switch mode {
	case ModeSingleton:
		v.errf(at("after"), "not for singleton jobs: they run continuously, not once per tick")
		return
	case ModeLocal:
		v.errf(at("after"), "not for mode: local yet: a chained run waits for its parents in the queue")
	}
	for _, k := range chainOnlyKeys {
		if v.set(at(k)) {
			v.errf(at(k), "not with after: the job ticks once per tick of its parents; leave %s out", k)
		}
	}
	switch j.OnParentFailure {
	case "":
		j.OnParentFailure = ParentFailureSkip
	case ParentFailureSkip, ParentFailureRun:
	default:
		v.errf(at("on_parent_failure"), "unknown policy %q (want skip or run)", string(j.OnParentFailure))
	}
	if !v.set(at("starting_deadline")) {
		j.StartingDeadline = DefaultChainWait
	}
}

// chains checks every job's parents, now that all are read: job list jobs
// (named once each, not the job itself, not singletons), no cycle; and
// gives each chained job its ticks, its parents' (schedule.Union), parents
// first.
func (v *validator) chains(byName map[string]*Job, paths map[*Job]string) {
	for _, j := range sortedChained(byName) {
		p := paths[j]
		seen := map[string]bool{}
		for i, name := range j.After {
			at := fmt.Sprintf("%s.after[%d]", p, i)
			parent, ok := byName[name]
			switch {
			case IsScheduleJob(name):
				v.errf(at, "%q: a job of the list runs after other jobs of the list, not after a runtime schedule", name)
			case !ok:
				v.errf(at, "no job %q in the list", name)
			case name == j.Name:
				v.errf(at, "the job itself: a job cannot run after itself")
			case seen[name]:
				v.errf(at, "%q named twice", name)
			case parent.Mode == ModeSingleton:
				v.errf(at, "%q is a singleton: it runs continuously, not once per tick", name)
			}
			seen[name] = true
		}
	}
	if cycle := findCycle(byName); len(cycle) > 0 {
		first := byName[cycle[0]]
		v.errf(paths[first]+".after", "a cycle: %s", strings.Join(append(cycle, cycle[0]), " -> "))
		return
	}
	done := map[string]bool{}
	var give func(j *Job)
	give = func(j *Job) {
		if done[j.Name] || len(j.After) == 0 {
			return
		}
		done[j.Name] = true
		u := schedule.Union{}
		for _, name := range j.After {
			if parent := byName[name]; parent != nil && parent.Mode != ModeSingleton && parent.Name != j.Name {
				give(parent)
				if parent.Sched != nil {
					u = append(u, parent.Sched)
				}
			}
		}
		if len(u) == 0 {
			return
		}
		j.Sched = u
		v.spacing(paths[j], j, u, [2]time.Time{})
	}
	for _, j := range sortedChained(byName) {
		give(j)
	}
	v.cfg.children = map[string][]int{}
	for i := range v.cfg.Jobs {
		for _, p := range v.cfg.Jobs[i].After {
			v.cfg.children[p] = append(v.cfg.children[p], i)
		}
	}
}

// sortedChained are the chained jobs of byName, by name.
func sortedChained(byName map[string]*Job) []*Job {
	var out []*Job
	for _, j := range byName {
		if len(j.After) > 0 {
			out = append(out, j)
		}
	}
	slices.SortFunc(out, func(a, b *Job) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// findCycle returns a cycle of after edges (job names, each running after
// the next, the last after the first), the first found in name order, or
// nil.
func findCycle(byName map[string]*Job) []string {
	const (
		unseen = iota
		open
		closed
	)
	state := map[string]int{}
	var stack []string
	var visit func(name string) []string
	visit = func(name string) []string {
		j := byName[name]
		if j == nil {
			return nil
		}
		state[name] = open
		stack = append(stack, name)
		for _, p := range j.After {
			switch state[p] {
			case open:
				i := slices.Index(stack, p)
				return slices.Clone(stack[i:])
			case unseen:
				if c := visit(p); c != nil {
					return c
				}
			}
		}
		stack = stack[:len(stack)-1]
		state[name] = closed
		return nil
	}
	for _, j := range sortedChained(byName) {
		if state[j.Name] == unseen {
			if c := visit(j.Name); c != nil {
				return c
			}
		}
	}
	return nil
}

// Children are the jobs that run after job (after:): the job list's, in
// file order, then the runtime schedules of the config's source that do
// (a ChildSource's).
func (c *Config) Children(job string) []*Job {
	var out []*Job
	if c.children != nil {
		for _, i := range c.children[job] {
			out = append(out, &c.Jobs[i])
		}
	} else {
		for i := range c.Jobs {
			if slices.Contains(c.Jobs[i].After, job) {
				out = append(out, &c.Jobs[i])
			}
		}
	}
	if cs, ok := c.source.(ChildSource); ok {
		out = append(out, cs.ScheduleChildren(job)...)
	}
	return out
}

// maxChainDepth bounds how far a runtime schedule's parents are followed
// up when its chain is checked for a cycle.
const maxChainDepth = 64

// runtimeChain checks a runtime schedule's parents (after:): jobs of the
// list or runtime schedules ("@" + id) the config finds (its source),
// each named once, not itself, not a singleton, with no way back to it;
// and gives it their ticks (schedule.Union) as they are now. A change of
// a parent's ticks reaches it when it is decoded again (a replica does so
// when a parent changes).
func (v *validator) runtimeChain(p string, j *Job) {
	if len(j.After) == 0 {
		return
	}
	u := schedule.Union{}
	seen := map[string]bool{}
	for i, name := range j.After {
		at := fmt.Sprintf("%s.after[%d]", p, i)
		parent, ok := v.cfg.Job(name)
		switch {
		case name == j.Name:
			v.errf(at, "the schedule itself: a job cannot run after itself")
		case seen[name]:
			v.errf(at, "%q named twice", name)
		case !ok:
			v.errf(at, "no job %q: name a job of the list, or a runtime schedule as \"@\" + its id, put before this one", name)
		case parent.Mode == ModeSingleton:
			v.errf(at, "%q is a singleton: it runs continuously, not once per tick", name)
		case parent.Sched != nil:
			u = append(u, parent.Sched)
		}
		seen[name] = true
	}
	cycle, tooDeep := v.runtimeCycle(j)
	switch {
	case cycle != nil:
		v.errf(p+".after", "a cycle: %s", strings.Join(cycle, " -> "))
		return
	case tooDeep:
		v.errf(p+".after", "its parents run after others more than %d deep: a chain of runtime schedules is at most %d long", maxChainDepth, maxChainDepth+2)
		return
	}
	if len(u) > 0 && len(v.errs) == 0 {
		j.Sched = u
		v.spacing(p, j, u, [2]time.Time{})
	}
}

// runtimeCycle returns a way from runtime schedule j's parents back to j
// (j, a parent, ..., j), following each job's after through the config's
// lookups; nil when there is none. tooDeep: its ancestors go further up
// than maxChainDepth (where a way back is not looked for).
func (v *validator) runtimeCycle(j *Job) (cycle []string, tooDeep bool) {
	var path []string
	visited := map[string]bool{}
	var walk func(name string, depth int) bool
	walk = func(name string, depth int) bool {
		if name == j.Name {
			return true
		}
		if depth > maxChainDepth {
			tooDeep = true
			return false
		}
		if visited[name] {
			return false
		}
		visited[name] = true
		parent, ok := v.cfg.Job(name)
		if !ok {
			return false
		}
		for _, pn := range parent.After {
			path = append(path, pn)
			if walk(pn, depth+1) {
				return true
			}
			path = path[:len(path)-1]
		}
		return false
	}
	for _, name := range j.After {
		path = []string{j.Name, name}
		if name != j.Name && walk(name, 0) {
			return path, false
		}
	}
	return nil, tooDeep
}

// ParentsAt are the parents of chained job j that have a tick at t (a
// parent whose schedule has no tick then does not hold j's tick back),
// in j's order.
func (c *Config) ParentsAt(j *Job, t time.Time) []*Job {
	var out []*Job
	for _, name := range j.After {
		if p, ok := c.Job(name); ok && schedule.Has(p.Sched, t) {
			out = append(out, p)
		}
	}
	return out
}

// Descendants are the jobs that run after job, at any depth (runtime
// schedules too, those the config's ChildSource knows), each after every
// parent it has among them (and job's place in the list, then a runtime
// schedule's name, decides between jobs that could come either way): the
// order in which a chain's backfill dispatches its links.
func (c *Config) Descendants(job string) []*Job {
	in := map[string]bool{}
	var found []*Job
	for next := []string{job}; len(next) > 0; {
		name := next[0]
		next = next[1:]
		for _, ch := range c.Children(name) {
			if !in[ch.Name] && ch.Name != job {
				in[ch.Name] = true
				found = append(found, ch)
				next = append(next, ch.Name)
			}
		}
	}
	// the candidates: the job list's in file order, then the runtime
	// schedules by name
	var cands []*Job
	for i := range c.Jobs {
		if in[c.Jobs[i].Name] {
			cands = append(cands, &c.Jobs[i])
		}
	}
	var runtime []*Job
	for _, j := range found {
		if IsScheduleJob(j.Name) {
			runtime = append(runtime, j)
		}
	}
	slices.SortFunc(runtime, func(a, b *Job) int { return strings.Compare(a.Name, b.Name) })
	cands = append(cands, runtime...)
	placed := map[string]bool{job: true}
	out := make([]*Job, 0, len(found))
	for len(out) < len(found) {
		progressed := false
		for _, j := range cands {
			if placed[j.Name] {
				continue
			}
			ready := true
			for _, p := range j.After {
				if in[p] && !placed[p] {
					ready = false
				}
			}
			if ready {
				placed[j.Name] = true
				out = append(out, j)
				progressed = true
			}
		}
		if !progressed { // a cycle, which Load refuses
			break
		}
	}
	return out
}
