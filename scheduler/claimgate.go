package scheduler

import (
	"container/heap"
	"sync"
	"time"
)

// claimGate bounds the chunks of ticks a replica claims and dispatches at
// once (claimsInFlight), and gives a freed slot to the waiting chunk whose
// earliest starting deadline comes first: a small job's tick due while a
// big instant's chunks wait is claimed before them, not recorded missed
// behind them.
type claimGate struct {
	mu      sync.Mutex
	free    int
	waiting waiters
}

func newClaimGate(slots int) *claimGate { return &claimGate{free: max(slots, 1)} }

// waiter is a chunk waiting for a slot: granted closes ready.
type waiter struct {
	deadline time.Time
	seq      uint64 // arrival, among equal deadlines
	ready    chan struct{}
	idx      int // in the heap; -1 once granted
}

type waiters struct {
	h   []*waiter
	seq uint64
}

func (w *waiters) Len() int { return len(w.h) }
func (w *waiters) Less(i, j int) bool {
	if !w.h[i].deadline.Equal(w.h[j].deadline) {
		return w.h[i].deadline.Before(w.h[j].deadline)
	}
	return w.h[i].seq < w.h[j].seq
}
func (w *waiters) Swap(i, j int) {
	w.h[i], w.h[j] = w.h[j], w.h[i]
	w.h[i].idx, w.h[j].idx = i, j
}
func (w *waiters) Push(x any) {
	x.(*waiter).idx = len(w.h)
	w.h = append(w.h, x.(*waiter))
}
func (w *waiters) Pop() any {
	x := w.h[len(w.h)-1]
	w.h = w.h[:len(w.h)-1]
	x.idx = -1
	return x
}

// acquire waits for a slot for a chunk whose earliest tick deadline is
// deadline; false when stop closed first (no slot is held then).
func (g *claimGate) acquire(deadline time.Time, stop <-chan struct{}) bool {
	g.mu.Lock()
	if g.free > 0 && g.waiting.Len() == 0 {
		g.free--
		g.mu.Unlock()
		return true
	}
	g.waiting.seq++
	w := &waiter{deadline: deadline, seq: g.waiting.seq, ready: make(chan struct{})}
	heap.Push(&g.waiting, w)
	g.mu.Unlock()
	select {
	case <-w.ready:
		return true
	case <-stop:
		g.mu.Lock()
		granted := w.idx < 0
		if !granted {
			heap.Remove(&g.waiting, w.idx)
		}
		g.mu.Unlock()
		if granted {
			g.release() // handed a slot as it stopped: pass it on
		}
		return false
	}
}

// release frees a slot: to the waiting chunk with the earliest deadline,
// if any.
func (g *claimGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.waiting.Len() > 0 {
		close(heap.Pop(&g.waiting).(*waiter).ready)
		return
	}
	g.free++
}

// earliestDeadline is when the first of batch's ticks passes its starting
// deadline.
func earliestDeadline(batch []item) time.Time {
	var first time.Time
	for i, it := range batch {
		if d := it.at.Add(it.job.StartingDeadline); i == 0 || d.Before(first) {
			first = d
		}
	}
	return first
}
