package main

import (
	"fmt"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"

	"github.com/batonhq/baton/locking"
)

// Fixed shape of the cells.
const (
	maxMasters   = 5
	contenders   = 8                      // goroutines on one key in cell C
	holdTime     = time.Millisecond       // time.Sleep inside the critical section
	redislockGap = 100 * time.Millisecond // redislock.LinearBackoff step in cell C
)

var (
	uncontendedConc = []int{1, 16}
	quorumSizes     = []int{3, 5}
	quorumConc      = 16
	pauses          = []time.Duration{0, time.Millisecond}
)

// contender is one library in one cell, with the counter of its commands.
type contender struct {
	name string
	r    runner
	cmds *cmdCounter
}

// bench holds the libraries set up for every cell and the results so far.
type bench struct {
	cfg      config
	backends []*backend
	batons   []*locking.Client

	cellA []contender         // one master, single attempts
	cellB map[int][]contender // masters -> baton, redsync
	cellC []contender         // one master, waiting

	res  *results
	errs map[string]string // cell|lib -> first error seen, for the notes

	servers []*serverMeter // one per master, in address order
}

func newBench(cfg config, addrs []string) (*bench, error) {
	b := &bench{cfg: cfg, cellB: map[int][]contender{}, res: newResults(), errs: map[string]string{}}
	back := func() *backend {
		x := newBackend(addrs)
		b.backends = append(b.backends, x)
		return x
	}
	batonFor := func(x *backend, n int) (*locking.Client, error) {
		// a prefix per quorum size: each set of masters starts as a fresh deployment
		c, err := locking.NewQuorum(x.universal(n), locking.WithPrefix(fmt.Sprintf("lb%d:", n)), locking.WithFreshDeployment())
		if err == nil {
			b.batons = append(b.batons, c)
		}
		return c, err
	}

	for _, a := range addrs {
		m, err := newServerMeter(a)
		if err != nil {
			return nil, err
		}
		b.servers = append(b.servers, m)
	}
	floorB, batonB, redsyncB, redislockB := back(), back(), back(), back()
	baton1, err := batonFor(batonB, 1)
	if err != nil {
		return nil, err
	}
	b.cellA = []contender{
		{"floor", floorRunner{floorB.clients[0]}, floorB.cmds},
		{"baton", batonRunner{c: baton1}, batonB.cmds},
		{"redsync", newRedsync(redsyncB.universal(1), redsync.WithTries(1)), redsyncB.cmds},
		{"redislock", redislockRunner{c: redislock.New(redislockB.clients[0])}, redislockB.cmds},
	}
	for _, n := range quorumSizes {
		bq, err := batonFor(batonB, n)
		if err != nil {
			return nil, err
		}
		b.cellB[n] = []contender{
			{"baton", batonRunner{c: bq}, batonB.cmds},
			{"redsync", newRedsync(redsyncB.universal(n), redsync.WithTries(1)), redsyncB.cmds},
		}
	}
	b.cellC = []contender{
		{"baton Lock", batonRunner{c: baton1, wait: true}, batonB.cmds},
		{"baton Lock fair", batonRunner{c: baton1, wait: true, opts: []locking.LockOption{locking.WithFair()}}, batonB.cmds},
		{"redsync", newRedsync(redsyncB.universal(1)), redsyncB.cmds},
		{"redislock", redislockRunner{c: redislock.New(redislockB.clients[0]),
			opt: &redislock.Options{RetryStrategy: redislock.LinearBackoff(redislockGap)}}, redislockB.cmds},
	}
	return b, nil
}

func (b *bench) close() {
	for _, c := range b.batons {
		_ = c.Close()
	}
	for _, x := range b.backends {
		x.close()
	}
	for _, m := range b.servers {
		m.close()
	}
}

// rotate returns cs rotated left by k: every repetition starts with a
// different library.
func rotate(cs []contender, k int) []contender {
	k %= len(cs)
	return append(append([]contender(nil), cs[k:]...), cs[:k]...)
}

// repetition runs every cell once.
func (b *bench) repetition(rep int) error {
	d := b.cfg.duration
	tag := fmt.Sprintf("rep %d/%d", rep+1, b.cfg.reps)

	for _, conc := range uncontendedConc {
		cell := fmt.Sprintf("A/%d", conc)
		floor := 0.0
		rates := map[string]float64{}
		for _, c := range rotate(b.cellA, rep) {
			before, err := b.read(1)
			if err != nil {
				return err
			}
			r, err := measurePairs(c.r, conc, d, fmt.Sprintf("lbA:%d:%d:%s", conc, rep, c.name))
			if err != nil {
				return fmt.Errorf("%s %s: %w", cell, c.name, err)
			}
			if err := b.addServerCost(cell, c.name, before, r.pairs); err != nil {
				return err
			}
			b.noteErr(cell, c.name, r.errs, r.firstErr)
			rates[c.name] = r.rate()
			if c.name == "floor" {
				floor = r.rate()
			}
			logf("%s  A  1 master  conc %-2d  %-10s %8.0f pairs/s  (%d errors)", tag, conc, c.name, r.rate(), r.errs)
		}
		for name, v := range rates {
			b.res.add(cell, name, "rate", v)
			b.res.add(cell, name, "ratio", v/floor)
		}
	}

	for _, n := range quorumSizes {
		cell := fmt.Sprintf("B/%d", n)
		rates := map[string]float64{}
		for _, c := range rotate(b.cellB[n], rep) {
			before, err := b.read(n)
			if err != nil {
				return err
			}
			r, err := measurePairs(c.r, quorumConc, d, fmt.Sprintf("lbB:%d:%d:%s", n, rep, c.name))
			if err != nil {
				return fmt.Errorf("%s %s: %w", cell, c.name, err)
			}
			if err := b.addServerCost(cell, c.name, before, r.pairs); err != nil {
				return err
			}
			b.noteErr(cell, c.name, r.errs, r.firstErr)
			rates[c.name] = r.rate()
			logf("%s  B  %d masters conc %-2d  %-10s %8.0f pairs/s  (%d errors)", tag, n, quorumConc, c.name, r.rate(), r.errs)
		}
		for name, v := range rates {
			b.res.add(cell, name, "rate", v)
		}
		b.res.add(cell, "baton", "ratio", rates["baton"]/rates["redsync"])
	}

	for _, pause := range pauses {
		cell := fmt.Sprintf("C/%v", pause)
		cc := contendConfig{workers: contenders, hold: holdTime, pause: pause, window: d, timeout: b.cfg.timeout}
		for _, c := range rotate(b.cellC, rep) {
			key := fmt.Sprintf("lbC:%d:%d:%s", pause.Milliseconds(), rep, c.name)
			began := time.Now()
			r, err := measureContended(c.r, cc, key, c.cmds)
			if err != nil {
				return fmt.Errorf("%s %s: %w", cell, c.name, err)
			}
			b.noteErr(cell, c.name, r.failed, r.failErr)
			b.res.addContended(cell, c.name, r, d)
			logf("%s  C  pause %-4v %-16s %6.0f acq/s  re-acq %3.0f%%  %5.1f cmds/acq  failed %d  overlaps %d  (%v)",
				tag, pause, c.name, float64(r.acquired)/d.Seconds(), 100*share(r.reacquired, int64(len(r.handoffs))),
				float64(r.commands)/float64(r.acquired), r.failed, r.overlaps, time.Since(began).Round(10*time.Millisecond))
		}
	}
	return nil
}

func share(a, b int64) float64 { return float64(a) / float64(a+b) }

func (b *bench) noteErr(cell, lib string, n int64, err error) {
	if n == 0 || err == nil {
		return
	}
	k := cell + "|" + lib
	if _, ok := b.errs[k]; !ok {
		b.errs[k] = err.Error()
	}
}
