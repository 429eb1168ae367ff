package baton

import (
	"context"
	"slices"
	"strconv"

	"github.com/batonhq/baton/internal/locknames"
	"github.com/batonhq/baton/internal/worker"
	"github.com/batonhq/baton/locking"
)

// LimitStatus is a limit shared by jobs (config limits:) as status sees
// it: its size, the job list's jobs naming it, and its slots held now.
type LimitStatus struct {
	Name string   `json:"name"`
	Size int      `json:"size"`
	Jobs []string `json:"jobs"`
	// Held are the slots held on a quorum of lock masters, by slot number.
	Held []SlotStatus `json:"held"`
}

// SlotStatus is a slot of a limit held now: its number, its fencing
// token, and the run holding it (nil when its holder record cannot be read:
// written by a later release, expired, or not yet written).
type SlotStatus struct {
	Index  int                `json:"index"`
	Fence  int64              `json:"fence"`
	Holder *worker.SlotHolder `json:"holder,omitempty"`
}

// limitsStatus derives the limits' lines from the locks held (heldBy) and
// the slots' holder records, read from the queue Redis. A limit whose
// records cannot be read lists its held slots without holders, and the
// error is returned.
func (c *Cluster) limitsStatus(ctx context.Context, heldBy map[string]*locking.HeldLock) ([]LimitStatus, error) {
	names := make([]string, 0, len(c.cfg.Limits))
	for n := range c.cfg.Limits {
		names = append(names, n)
	}
	slices.Sort(names)
	var out []LimitStatus
	var firstErr error
	for _, name := range names {
		size := c.cfg.Limits[name]
		ls := LimitStatus{Name: name, Size: size, Jobs: c.cfg.LimitedJobs(name), Held: []SlotStatus{}}
		holders, err := worker.ReadSlotHolders(ctx, c.queue, c.cfg.Namespace, name, size)
		if err != nil && firstErr == nil {
			firstErr = err
		}
		for i := range size {
			l := heldBy["sem:"+locknames.Limit(name)+"#"+strconv.Itoa(i)]
			if l == nil || l.Masters < l.Quorum {
				continue
			}
			s := SlotStatus{Index: i, Fence: l.Fence}
			if i < len(holders) {
				s.Holder = holders[i]
			}
			ls.Held = append(ls.Held, s)
		}
		out = append(out, ls)
	}
	return out, firstErr
}
