package baton

import (
	"context"
	"slices"
	"strconv"
	"strings"

	"github.com/batonhq/baton/config"
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
	// Held are the slots held on a quorum of lock masters, by slot number
	// (slots at or above Size too: held since before the limit was
	// lowered).
	Held []SlotStatus `json:"held"`
}

// SlotStatus is a slot of a limit held now: its number, its fencing
// token (the holder record's, else the highest the masters report), and
// the run holding it (nil when its holder record cannot be read:
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
		slots := slotsHeld(name, size, heldBy)
		holders, err := worker.ReadSlotHolders(ctx, c.queue, c.cfg.Namespace, name, slots)
		if err != nil && firstErr == nil {
			firstErr = err
		}
		for i := range slots {
			l := heldBy["sem:"+locknames.Limit(name)+"#"+strconv.Itoa(i)]
			if l == nil || l.Masters < l.Quorum {
				continue
			}
			s := SlotStatus{Index: i, Fence: l.Fence}
			if i < len(holders) && holders[i] != nil {
				// the holder's own token: the masters' counters may run
				// ahead of it (an acquisition under way, a lost one)
				s.Holder, s.Fence = holders[i], holders[i].Fence
			}
			ls.Held = append(ls.Held, s)
		}
		out = append(out, ls)
	}
	return out, firstErr
}

// slotsHeld is how many of limit's slots status looks at: its size, or
// more where a slot at or above it is held (the limit was lowered: runs on
// the slots above the new size go on until they end), up to
// config.MaxLimit.
func slotsHeld(limit string, size int, heldBy map[string]*locking.HeldLock) int {
	prefix := "sem:" + locknames.Limit(limit) + "#"
	n := size
	for name := range heldBy {
		if rest, ok := strings.CutPrefix(name, prefix); ok {
			if i, err := strconv.Atoi(rest); err == nil && i >= n && i < config.MaxLimit {
				n = i + 1
			}
		}
	}
	return n
}
