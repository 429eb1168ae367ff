package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/lifecycle"
	"github.com/batonhq/baton/internal/wiring"
)

// exitInterrupted is the status of a process stopped by a second signal
// while it was shutting down (128+SIGINT, as a shell reports Ctrl-C).
const exitInterrupted = 130

// serveHelp is the help of run, scheduler and worker.
var serveHelp = map[baton.Role]string{
	baton.RoleAll: `usage: baton run [flags]

Runs a replica: the scheduler, which claims every tick of every job once
across all replicas and dispatches it, and the worker, which runs the jobs
dispatched into the queue. SIGTERM or SIGINT stops it gracefully (running
jobs get worker.shutdown_grace); a second signal exits at once.

flags:
`,
	baton.RoleScheduler: `usage: baton scheduler [flags]

Runs the scheduler alone: it claims and dispatches ticks; cron-mode jobs run
on workers elsewhere ("baton worker"), local-mode jobs run here.

flags:
`,
	baton.RoleWorker: `usage: baton worker [flags]

Runs the worker alone: it runs the cron-mode jobs that schedulers dispatched
into the queue.

flags:
`,
}

// commonOpts are the common flags of a long-running command and the check
// to run after parsing.
type commonOpts struct {
	cf     *commonFlags
	finish func(args []string) error
}

// serveCommand is "baton run", "baton scheduler" or "baton worker".
func (c *cli) serveCommand(r baton.Role) *cobra.Command {
	define := func(fs *flagSet) commonOpts {
		cf, finish := addCommon(fs, defaultConfigFile)
		return commonOpts{cf, finish}
	}
	return subcommand(c, r.String(), serveHelp[r], nil, define,
		func(fs *flagSet, o commonOpts, args []string, stdout, stderr io.Writer) int {
			return runServe(r, fs, o, args, stdout, stderr)
		})
}

// runServe implements "baton run", "baton scheduler" and "baton worker".
func runServe(r baton.Role, fs *flagSet, o commonOpts, args []string, stdout, stderr io.Writer) int {
	name := r.String()
	cf := o.cf
	if err := o.finish(args); err != nil {
		return usageExit(name, err, stderr)
	}
	cfg, err := loadConfigFile(fs, cf.config)
	if err != nil {
		return usageExit(name, err, stderr)
	}
	if err := missingHandlers(cfg, r); err != nil {
		return usageExit(name, err, stderr)
	}
	addr, err := httpListen(fs, cf, cfg)
	if err != nil {
		return usageExit(name, err, stderr)
	}
	zl := newZerolog(stderr, cf.logFormat, cf.logLevel)
	log := newSlog(zl, cfg.SecretValues())
	log.Info("baton starting", "version", versionString(), "command", name, "replica", cf.id,
		"config", cf.config, "redis", wiring.DescribeRedis(cfg), "jobs", len(cfg.Jobs))
	log.Debug("effective config\n" + cfg.Redacted())
	warnUnsigned(cfg, log)
	tp, flushTraces, err := tracesFromEnv(log)
	if err != nil {
		return usageExit(name, err, stderr)
	}
	defer flushTraces()
	build := func(cfg *config.Config) (*baton.Replica, error) {
		return baton.New(cfg, baton.WithReplicaID(cf.id), baton.WithRole(r), baton.WithLogger(log), baton.WithVersion(shortVersion()),
			baton.WithTracerProvider(tp), baton.WithHTTPServed())
	}
	rp, err := build(cfg)
	if err != nil {
		log.Error("cannot build the replica", "err", err)
		return 1
	}
	live, err := newLiveReplica(cf.config, cfg, rp, build, log)
	if err != nil {
		log.Error("cannot read the config file", "err", err)
		rp.Close()
		return 1
	}
	return serve([]unit{live}, addr, false, log, zl)
}

// unit is what serve runs: a replica, or a liveReplica that replaces its
// replica when the config changes.
type unit interface {
	Start(ctx context.Context) error
	Run(ctx context.Context) error
	Close()
	ID() string
}

// replicasOf returns the replicas the units run now.
func replicasOf(units []unit) []*baton.Replica {
	var out []*baton.Replica
	for _, u := range units {
		switch u := u.(type) {
		case *baton.Replica:
			out = append(out, u)
		case *liveReplica:
			out = append(out, u.current())
		}
	}
	return out
}

// warnUnsigned says, once at start, that tasks are not signed.
func warnUnsigned(cfg *config.Config, log *slog.Logger) {
	if len(cfg.Security.SigningKeys) == 0 {
		log.Warn("security.signing_keys is not set: tasks and replace requests are not signed, so anyone who can write to this Redis can make baton run any cron job (see the README's Security section)")
	}
}

// httpListen returns the HTTP listen address: --http, else http.listen of
// the config; empty for none. It must be host:port.
func httpListen(fs *flagSet, cf *commonFlags, cfg *config.Config) (string, error) {
	addr, src := cfg.HTTP.Listen, "http.listen in "+cf.config
	if cf.http != "" {
		addr, src = cf.http, fs.source("http")
	}
	if addr == "" {
		return "", nil
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return "", usagef("%s: listen address %q: want host:port, e.g. 127.0.0.1:8080", src, addr)
	}
	return addr, nil
}

// usageExit prints the one line "baton NAME: err" (every line of a config error on its
// own, as it is: each names file and line) and returns exitUsage.
func usageExit(name string, err error, stderr io.Writer) int {
	var ce *configErrors
	if errors.As(err, &ce) {
		fmt.Fprintln(stderr, ce.Error())
		return exitUsage
	}
	// the package's own "baton: " prefix would stutter after "baton NAME: "
	printf(stderr, "baton %s: %s\n", name, errors.New(strings.TrimPrefix(err.Error(), "baton: ")))
	return exitUsage
}

// serve starts the HTTP listener (addr empty: none; optional: a listen
// failure is only logged), the replicas and the HTTP server, as the parts
// of one lifecycle group (servedParts), and runs them until SIGTERM or
// SIGINT, or until a part fails. It returns the exit status.
//
// The parts stop in reverse, on the first signal (or when any part fails):
//
//  1. /readyz answers 503 "shutting down" while the rest drains.
//  2. Each replica's scheduler stops claiming (its Run ctx is cancelled);
//     claims in flight commit or release their tick leases.
//  3. Each worker shuts down: no new runs; running jobs get
//     worker.shutdown_grace, then are cancelled; every execution lease is
//     released. Lock clients and Redis connections are closed.
//  4. The HTTP server stops, giving requests in flight a few seconds.
//
// Exit 0 after a signal. A second signal exits at once with status 130.
func serve(replicas []unit, addr string, optional bool, log *slog.Logger, zl zerolog.Logger) int {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)

	closeAll := func() {
		for _, rp := range replicas {
			rp.Close()
		}
	}
	var h *httpServer
	if addr != "" {
		var err error
		h, err = newHTTPServer(addr, replicasOf(replicas), log)
		if err != nil && optional {
			log.Warn(noHTTPMessage(addr, err), "err", err)
		} else if err != nil {
			log.Error("cannot serve HTTP", "err", err)
			closeAll()
			return 1
		}
	}
	for _, u := range replicas {
		if l, ok := u.(*liveReplica); ok && h != nil {
			l.swap = func(rp *baton.Replica) { h.replace(rp) }
		}
	}
	failed := make(chan error, len(replicas)+1)
	g := lifecycle.NewGroup(servedParts(replicas, h, failed)...)
	if err := g.Start(context.Background()); err != nil {
		log.Error("cannot start", "err", err)
		drainFailures(failed, log)
		closeAll() // the replicas never started; the others are stopped
		return 1
	}

	code := 0
	select {
	case sig := <-sigs:
		log.Info("signal received: shutting down (a second signal exits at once)", "signal", sig.String())
		stopped := make(chan struct{})
		defer close(stopped)
		go func() {
			select {
			case sig := <-sigs:
				zl.Error().Str("signal", sig.String()).Msg("second signal: exiting at once, without waiting for running jobs")
				os.Exit(exitInterrupted)
			case <-stopped:
			}
		}()
	case err := <-failed:
		log.Error("stopping on error", "err", err)
		code = 1
	}
	// each replica bounds its own stop (worker.shutdown_grace, the claims'
	// commits); the HTTP server gives requests a few seconds
	if err := g.Stop(context.Background()); err != nil {
		log.Error("shutdown error", "err", err)
		code = 1
	}
	if drainFailures(failed, log) {
		code = 1
	}
	if code == 0 {
		log.Info("baton stopped")
	}
	return code
}

// servedParts are the parts serve starts, in order: the HTTP server's
// listener (h nil: none), whose stop ends the server last; the replicas
// (a replicaSet: each started and then run until their stop, which ends
// them together); the HTTP server's serving, started once every replica
// runs, whose stop makes /readyz answer 503 first. A replica's Run or the
// server's Serve that returns while it should run sends its error on
// failed (once; its stop then returns nil).
func servedParts(replicas []unit, h *httpServer, failed chan<- error) []lifecycle.Part {
	var parts []lifecycle.Part
	var serving *lifecycle.Loop
	if h != nil {
		serving = lifecycle.NewLoop(func(ctx context.Context) error {
			if err := h.serve(); err != nil { // nil once the "http" part shut the server down
				failed <- err
			}
			return nil
		})
		parts = append(parts, lifecycle.Part{Name: "http", Service: lifecycle.Funcs(nil, func(ctx context.Context) error {
			if serving.Done() == nil {
				h.close() // it never served: another part failed to start
				return nil
			}
			h.shutdown()
			return serving.Stop(ctx)
		})})
	}
	rs := &replicaSet{units: replicas, failed: failed}
	parts = append(parts, lifecycle.Part{Name: "replicas", Service: lifecycle.Funcs(rs.start, rs.stop)})
	if h != nil {
		parts = append(parts, lifecycle.Part{Name: "http serving", Service: lifecycle.Funcs(serving.Start, func(context.Context) error {
			h.drain()
			return nil
		})})
	}
	return parts
}

// drainFailures logs the failures of parts that stopped on their own that
// serve did not wait for (one came first, or they came while it started
// or stopped), and says whether there were any.
func drainFailures(failed <-chan error, log *slog.Logger) bool {
	any := false
	for {
		select {
		case err := <-failed:
			log.Error("stopping on error", "err", err)
			any = true
		default:
			return any
		}
	}
}

// replicaSet is serve's replicas as one part: started one after the
// other (each Start, then its Run in the background), stopped together
// (every Run's context ends at once, as each replica's worker drains for
// worker.shutdown_grace: one after the other, N replicas would take N
// times that, and the ones not yet stopped would go on claiming ticks).
type replicaSet struct {
	units  []unit
	failed chan<- error
	runs   []*lifecycle.Loop // of the units started, in order
}

func (s *replicaSet) start(ctx context.Context) error {
	for _, rp := range s.units {
		run := lifecycle.NewLoop(func(ctx context.Context) error {
			err := rp.Run(ctx)
			if ctx.Err() == nil {
				if err == nil {
					err = fmt.Errorf("replica %s stopped on its own", rp.ID())
				}
				s.failed <- err
				return nil
			}
			return err
		})
		err := rp.Start(ctx)
		if err == nil {
			err = run.Start(ctx)
		}
		if err != nil {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			return errors.Join(fmt.Errorf("replica %s: %w", rp.ID(), err), s.stop(sctx))
		}
		s.runs = append(s.runs, run)
	}
	return nil
}

// stop ends every started replica's Run at once and waits for them all;
// their errors are joined.
func (s *replicaSet) stop(ctx context.Context) error {
	errs := make([]error, len(s.runs))
	var wg sync.WaitGroup
	for i, run := range s.runs {
		wg.Go(func() {
			if err := run.Stop(ctx); err != nil {
				errs[i] = err
				return
			}
			errs[i] = run.Err()
		})
	}
	wg.Wait()
	s.runs = nil
	return errors.Join(errs...)
}

// noHTTPMessage is the warning of baton dev when its HTTP listener cannot
// start: for an address in use, it names the likely cause (another baton
// dev on this host) and the way out.
func noHTTPMessage(addr string, err error) string {
	if errors.Is(err, syscall.EADDRINUSE) {
		return "no HTTP endpoints (dashboard, API, /metrics): " + addr + " is in use, perhaps by another baton dev; the replicas run without them (--http 127.0.0.1:0 picks a free port)"
	}
	return "no HTTP endpoints (dashboard, API, /metrics)"
}
