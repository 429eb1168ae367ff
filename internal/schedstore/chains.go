package schedstore

import (
	"bytes"
	"encoding/json"
	"slices"

	"github.com/batonhq/baton/config"
)

// Runtime schedules run after others (after:): jobs of the list, or other
// runtime schedules ("@" + id). A Follower decodes a schedule after its
// parents (it ticks at their ticks as they are when it is decoded), keeps
// which schedules run after which job (ScheduleChildren, so that
// config.Config.Children and the outcome records a parent's tick writes
// know them), and decodes the children again when a parent changes or
// goes.

// batchSource finds the parents of the schedules a Follower decodes: those
// decoded in the same batch first, then the copy's (never Redis: a parent
// not there yet refuses the child until it comes, then recheck decodes it
// again).
type batchSource struct {
	f     *Follower
	batch map[string]*config.Job
}

func (b *batchSource) ScheduleJob(name string) (*config.Job, bool) {
	if j, ok := b.batch[name]; ok {
		return j, true
	}
	b.f.mu.RLock()
	defer b.f.mu.RUnlock()
	e, ok := b.f.byName[name]
	if !ok || e.job == nil {
		return nil, false
	}
	return e.job, true
}

// ScheduleChildren returns the runtime schedules of the copy that run
// after job (config.ChildSource).
func (f *Follower) ScheduleChildren(job string) []*config.Job {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var out []*config.Job
	for _, name := range slices.Sorted(mapKeys(f.children[job])) {
		if e, ok := f.byName[name]; ok && e.job != nil {
			out = append(out, e.job)
		}
	}
	return out
}

// link notes that j runs after its parents; unlink takes that back. A
// parent with children is noted for recheck when it changes. Under f.mu.
func (f *Follower) link(j *config.Job) {
	for _, p := range j.After {
		if f.children[p] == nil {
			f.children[p] = map[string]bool{}
		}
		f.children[p][j.Name] = true
	}
	if len(f.children[j.Name]) > 0 {
		f.dirty = append(f.dirty, j.Name)
	}
}

func (f *Follower) unlink(j *config.Job) {
	for _, p := range j.After {
		delete(f.children[p], j.Name)
		if len(f.children[p]) == 0 {
			delete(f.children, p)
		}
	}
	if len(f.children[j.Name]) > 0 {
		f.dirty = append(f.dirty, j.Name)
	}
}

// chainedDoc tells whether a definition may name parents (after:).
func chainedDoc(doc []byte) bool { return bytes.Contains(doc, []byte(`"after":`)) }

// parentsOf are the parents a definition names.
func parentsOf(doc []byte) []string {
	var d struct {
		After []string `json:"after"`
	}
	_ = json.Unmarshal(doc, &d)
	return d.After
}

// decodeInOrder calls decode for each of n schedules (k < n), each after
// the others of them that it names (parents(k), by job name; name(k) is
// its own); when no order is left (a cycle), the rest in turn.
func decodeInOrder(n int, parents func(k int) []string, name func(k int) string, decode func(k int)) {
	pending := map[string]int{}
	for k := range n {
		pending[name(k)] = k
	}
	for len(pending) > 0 {
		var ready []string
		for nm, k := range pending {
			if !slices.ContainsFunc(parents(k), func(p string) bool { _, waits := pending[p]; return waits && p != nm }) {
				ready = append(ready, nm)
			}
		}
		if len(ready) == 0 {
			for nm := range pending {
				ready = append(ready, nm)
			}
		}
		slices.Sort(ready)
		for _, nm := range ready {
			decode(pending[nm])
			delete(pending, nm)
		}
	}
}

func mapKeys(m map[string]bool) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
