package scheduler

import (
	"context"
	"time"

	"github.com/batonhq/baton/internal/quorum"
)

// A tick is recorded done by its commit, on every master, in one of two
// ways chosen by its job: after the dispatch (commit.lua: the run is in a
// queue that takes a tick once, so "done" is true whoever writes it) or,
// for jobs that commit first, before the run starts (commit_owned.lua:
// token-checked, and the record names the claim that wrote it).
//
// An answer that does not come back (a reply later than the master
// timeout, a link cut while the commit is on its way) does not say whether
// the commit landed. Both commits can be sent again: a second commit_owned
// of the same claim answers 1 for its own record. So a commit is sent again
// to the masters that did not answer it, until a quorum has it, while the
// tick's lease holds (counted from the first send: a master whose lease
// expired answers 0 to a token-checked commit anyway). A commit first that
// stays short of a quorum is not run: its lease is released and the tick
// claimed again with the same token, and that claim tells this claim's own
// records from another's (MINE).

// commitBackoff is the first wait before a commit is sent again; it doubles
// up to commitBackoffMax.
const (
	commitBackoff    = 20 * time.Millisecond
	commitBackoffMax = 500 * time.Millisecond
)

// commit records the dispatched ticks of the batch at the indices idx as
// done, in one pipeline, sent again to complete the ones short of a quorum
// (see toQuorum). It goes out even when ctx ended (shutdown), bounded by
// the tick lease ttl.
func (s *Scheduler) commit(ctx context.Context, batch []item, idx []int) {
	for _, i := range idx {
		s.note("committed", batch[i])
	}
	ok := s.toQuorum(context.WithoutCancel(ctx), len(idx), commitScript, func(k int) ([]string, []any) {
		it := batch[idx[k]]
		return []string{it.key(), s.keysOf(it.job).mark()}, []any{it.at.UnixMilli(), s.recordTTL(it.job).Milliseconds()}
	})
	n := 0
	for k, done := range ok {
		if !done {
			s.add(batch[idx[k]].job, func(c *stats) { c.commitErrors.Add(1) })
			n++
		}
	}
	if n > 0 {
		// the runs are in the queue (its task IDs dedupe them); the
		// records are what lets followers skip the ticks
		s.opts.log.Warn("dispatched ticks not recorded on a majority of lock masters; followers will find them enqueued", "ticks", n, "replica", s.opts.replica)
	}
}

// toQuorum runs a commit script (n items, each answering 1 when recorded
// and 0 when refused) on every master, and sends the items not yet recorded
// on a quorum again after a back-off, until each is recorded on a quorum,
// refused by too many masters to get there, or the tick lease ttl since the
// first send has passed. It reports, by item, which reached a quorum. A
// master that answered 1 once keeps the record: later attempts only have to
// reach the others.
func (s *Scheduler) toQuorum(ctx context.Context, n int, script *quorum.Script, args func(k int) ([]string, []any)) []bool {
	ok := make([]bool, n)
	recorded := make([][]bool, n) // by item, then by master
	pending := make([]int, n)     // items not settled yet
	for k := range n {
		recorded[k] = make([]bool, len(s.masters))
		pending[k] = k
	}
	deadline := s.opts.clock.Now().Add(s.opts.leaseTTL)
	wait := commitBackoff
	for {
		answers := s.pipeline(ctx, len(pending), script, func(j int) ([]string, []any) { return args(pending[j]) })
		next := pending[:0]
		for j, k := range pending {
			have, refused := 0, 0
			for m := range s.masters {
				a := answers[m][j]
				if a.err == nil && a.st == 1 {
					recorded[k][m] = true
				}
				if recorded[k][m] {
					have++
				} else if a.err == nil {
					refused++
				}
			}
			switch {
			case have >= s.quorum:
				ok[k] = true
			case refused > len(s.masters)-s.quorum:
				// refused by too many: never on a quorum
			default:
				next = append(next, k)
			}
		}
		pending = next
		if len(pending) == 0 || s.opts.clock.Now().Add(wait).After(deadline) {
			return ok
		}
		t := s.opts.clock.NewTimer(wait)
		<-t.C()
		wait = min(2*wait, commitBackoffMax)
	}
}
