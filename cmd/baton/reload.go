package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/config"
)

// reloadPoll is how often the config file is looked at for changes (its
// content, not its time stamp: a ConfigMap is swapped through symlinks).
const reloadPoll = 2 * time.Second

// reloadDrain is how long at most a replaced replica's worker goes on
// after a reload, without claiming: tasks it dispatched of jobs the new
// list removed or moved are handed back to it by the new worker (every
// second). It stops earlier once no queue holds such a task (checked every
// reloadCheck): while both workers run, each fetches tasks only the other
// can run and hands them back, which delays them.
const (
	reloadDrain = 10 * time.Second
	reloadCheck = 250 * time.Millisecond
)

// liveReplica runs one replica and replaces it when the config file changes
// (SIGHUP, or a change seen by polling the file). A new config is loaded
// and validated in full first: a file that does not load is rejected with
// every error logged, and the running replica goes on. A valid one is
// started as a new replica beside the running one, which then stops
// gracefully: for a moment both claim ticks, as two replicas of a rolling
// deploy do, so no tick is lost at the switch, and the claim keeps every
// tick to one dispatch; the old replica's running jobs get its
// worker.shutdown_grace.
type liveReplica struct {
	path  string
	build func(cfg *config.Config) (*baton.Replica, error)
	swap  func(rp *baton.Replica) // points the HTTP endpoints at rp (nil: none)
	log   *slog.Logger

	mu      sync.Mutex
	cur     *baton.Replica
	cfg     *config.Config
	sum     [32]byte
	retired sync.WaitGroup // old replicas still stopping
}

// newLiveReplica returns the runner of rp, which was built from cfg, loaded
// from path; build makes the replicas of later configs.
func newLiveReplica(path string, cfg *config.Config, rp *baton.Replica, build func(*config.Config) (*baton.Replica, error), log *slog.Logger) (*liveReplica, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return &liveReplica{path: path, build: build, log: log, cur: rp, cfg: cfg, sum: configSum(data, cfg)}, nil
}

// configSum hashes a config file's content and that of the calendar files
// cfg read beside it (one that cannot be read hashes as its error): a
// reload reads them all again when one changed.
func configSum(data []byte, cfg *config.Config) [32]byte {
	h := sha256.New()
	h.Write(data)
	for _, p := range cfg.CalendarFiles() {
		b, err := os.ReadFile(p)
		if err != nil {
			b = []byte(err.Error())
		}
		fmt.Fprintf(h, "\x00%s\x00%d\x00", p, len(b))
		h.Write(b)
	}
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}

// Start starts the running replica (see baton.Replica.Start).
func (l *liveReplica) Start(ctx context.Context) error { return l.current().Start(ctx) }

// Run runs until ctx ends, replacing the replica on config changes.
func (l *liveReplica) Run(ctx context.Context) error { return l.run(ctx) }

// Close closes the running replica.
func (l *liveReplica) Close() { l.current().Close() }

// ID is the replicas' id.
func (l *liveReplica) ID() string { return l.current().ID() }

// current returns the running replica.
func (l *liveReplica) current() *baton.Replica {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cur
}

// run runs the current replica until ctx ends, replacing it on reloads. It
// returns when ctx ends (after every replica stopped) or when a replica
// stops on its own.
func (l *liveReplica) run(ctx context.Context) error {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	poll := time.NewTicker(reloadPoll)
	defer poll.Stop()

	cur := runReplica(ctx, l.cur)
	defer l.retired.Wait()
	for {
		select {
		case <-ctx.Done():
			cur.stop()
			return <-cur.done
		case err := <-cur.done:
			cur.stop()
			if err == nil && ctx.Err() == nil {
				err = fmt.Errorf("replica %s stopped on its own", cur.rp.ID())
			}
			return err
		case <-hup:
			l.log.Info("SIGHUP: reloading the config", "config", l.path)
			cur = l.reload(ctx, cur, true)
		case <-poll.C:
			cur = l.reload(ctx, cur, false)
		}
	}
}

// running is a replica whose Run runs: stop ends it, done gets Run's error.
type running struct {
	rp   *baton.Replica
	stop context.CancelFunc
	done chan error
}

// runReplica runs rp until ctx ends or stop is called.
func runReplica(ctx context.Context, rp *baton.Replica) running {
	rctx, stop := context.WithCancel(ctx)
	r := running{rp: rp, stop: stop, done: make(chan error, 1)}
	go func() { r.done <- rp.Run(rctx) }()
	return r
}

// reload loads the config file and, when it changed and is valid, starts a
// replica of it and retires cur. It returns the replica running afterwards.
func (l *liveReplica) reload(ctx context.Context, cur running, asked bool) running {
	data, err := os.ReadFile(l.path)
	if err != nil {
		l.log.Error("config reload: cannot read the file; keeping the running job list", "config", l.path, "err", err)
		return cur
	}
	sum := configSum(data, l.cfg)
	if sum == l.sum {
		if asked {
			l.log.Info("config reload: the file has not changed", "config", l.path)
		}
		return cur
	}
	cfg, err := config.LoadFile(l.path)
	if err != nil {
		l.sum = sum // reported once per content
		var ce *config.Error
		if errors.As(err, &ce) {
			for _, fe := range ce.Errors {
				l.log.Error("config reload rejected; keeping the running job list", "error", fe.Error())
			}
		} else {
			l.log.Error("config reload rejected; keeping the running job list", "err", err)
		}
		return cur
	}
	next, err := l.build(cfg)
	if err == nil {
		if err = next.Start(ctx); err != nil {
			next.Close()
		}
	}
	if err != nil {
		l.log.Error("config reload: cannot start a replica of the new config; keeping the running one", "err", err)
		return cur
	}
	added, removed, changed := diffJobs(l.cfg, cfg)
	started := runReplica(ctx, next)
	if l.swap != nil {
		l.swap(next)
	}
	l.mu.Lock()
	l.cur, l.cfg, l.sum = next, cfg, configSum(data, cfg) // with the files the new config reads
	l.mu.Unlock()
	// the new replica claims from now on; the old one stops claiming, runs
	// for a while the tasks it dispatched (the new replica hands back those
	// of jobs its list lacks), then stops, letting its running jobs finish
	cur.rp.StopClaiming()
	l.retired.Add(1)
	go func() {
		defer l.retired.Done()
		l.drain(ctx, cur.rp, cfg)
		cur.stop()
		if err := <-cur.done; err != nil && !errors.Is(err, context.Canceled) {
			l.log.Warn("the replaced replica stopped with an error", "replica", cur.rp.ID(), "err", err)
		}
	}()
	l.log.Info("config reloaded", "config", l.path, "jobs", len(cfg.Jobs),
		"added", strings.Join(added, ","), "removed", strings.Join(removed, ","), "changed", strings.Join(changed, ","))
	return started
}

// drain waits until the replaced replica old is retirable beside a replica
// of next (see baton.Replica.Retirable), reloadDrain at most, or ctx ends.
func (l *liveReplica) drain(ctx context.Context, old *baton.Replica, next *config.Config) {
	start := time.Now()
	deadline := time.NewTimer(reloadDrain)
	defer deadline.Stop()
	check := time.NewTicker(reloadCheck)
	defer check.Stop()
	why := "not checked"
	for {
		select {
		case <-ctx.Done():
			return
		case <-deadline.C:
			l.log.Info("the replaced replica stops: drain time is up", "replica", old.ID(), "drain", reloadDrain, "still", why)
			return
		case <-check.C:
			cctx, cancel := context.WithTimeout(ctx, reloadCheck*4)
			w, err := old.Retirable(cctx, next)
			cancel()
			switch {
			case err != nil:
				why = next.MaskSecrets(err.Error())
			case w != "":
				why = w
			default:
				l.log.Info("the replaced replica stops: nothing left that only it runs", "replica", old.ID(),
					"after", time.Since(start).Round(time.Millisecond))
				return
			}
		}
	}
}

// diffJobs names the jobs b adds to a, removes from it and changes.
func diffJobs(a, b *config.Config) (added, removed, changed []string) {
	for _, j := range b.Jobs {
		old, ok := a.Job(j.Name)
		switch {
		case !ok:
			added = append(added, j.Name)
		case a.JobDefinition(old) != b.JobDefinition(&j):
			changed = append(changed, j.Name)
		}
	}
	for _, j := range a.Jobs {
		if _, ok := b.Job(j.Name); !ok {
			removed = append(removed, j.Name)
		}
	}
	slices.Sort(added)
	slices.Sort(removed)
	slices.Sort(changed)
	return added, removed, changed
}
