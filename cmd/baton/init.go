package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/redact"
	"github.com/batonhq/baton/internal/redisurl"
	"github.com/batonhq/baton/locking"
)

const initHelp = `usage: baton init [--config FILE]
       baton init --redis URL [--redis URL ...] [--prefix PREFIX]

Marks a brand-new set of lock masters, once, before first use, so that they
vote at once. Without it a master found without a marker waits out the
restart quarantine (locking.restart_quarantine, default 1m) before it grants
a lock or decides a tick: Redis cannot tell a brand-new server from one that
restarted empty, and only the operator knows which it is.

With --config (the default: $BATON_CONFIG, else baton.yaml), it marks the
config's lock masters (locking.masters, else redis.url) under its namespace:
the masters of baton run, scheduler and worker, and of baton lock --config.
With --redis, it marks the masters of baton lock --redis under --prefix
(default baton:lock:, as baton lock's).

It refuses, naming each one, when any master already carries a marker (in
use, marked before, or reloaded from a snapshot) or does not answer, and,
with --config, when a replica of the namespace runs (the roster on the
queue Redis: a master without a marker under a running deployment
restarted empty); it marks nothing then. A master that restarts empty
later waits out its quarantine as always. Run it by hand for a new set,
never in every start: a set whose masters all restarted empty at once
carries no marker either, and marking it fresh gives up restart safety.

With --config it first records the config's layout for its namespace
(schedules.shards and worker.lanes: every replica must use the same, and
a replica whose config says otherwise refuses to start). When the shard
count changes it moves the stored runtime schedules into their new shards,
which needs every replica stopped; it refuses to drop lanes that still
hold tasks. A deployment in use whose layout changed exits 0 although its
masters carry markers already.

Exit status: 0 marked (or a new layout recorded); 1 refused, or masters
unreachable; 2 usage error.

flags:
`

// initFlags are the flags of "baton init".
type initFlags struct {
	path, prefix, passwordFile string
	urls                       []string
}

// defineInit defines the flags of "baton init".
func defineInit(fs *flagSet) *initFlags {
	o := &initFlags{}
	fs.stringEnv(&o.path, "config", envConfig, defaultConfigFile, "config `FILE` whose lock masters to mark")
	fs.StringArrayVar(&o.urls, "redis", nil, "mark this lock master `URL` of baton lock instead; repeat for a quorum")
	fs.StringVar(&o.prefix, "prefix", defaultPrefix, "with --redis: the lock keys' prefix, as baton lock --prefix")
	fs.StringVar(&o.passwordFile, "redis-password-file", "", "with --redis: the password for URLs without one, from the first line of `FILE` (else $"+envRedisAuth+")")
	return o
}

// runInit implements "baton init".
func runInit(fs *flagSet, o *initFlags, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		return usageExit("init", usagef("unexpected argument %q", args[0]), stderr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var err error
	if len(o.urls) > 0 {
		if fs.isSet("config") && !fs.fromEnv["config"] {
			return usageExit("init", usagef("--config and --redis do not go together: pick the config's masters or baton lock's"), stderr)
		}
		err = initLockMasters(ctx, o.urls, o.prefix, o.passwordFile)
	} else {
		if fs.isSet("prefix") {
			return usageExit("init", usagef("--prefix goes with --redis: a config's masters use its namespace"), stderr)
		}
		cfg, lerr := loadConfig(o.path)
		if lerr != nil {
			return usageExit("init", lerr, stderr)
		}
		var changed bool
		changed, err = initLayout(cfg, stdout)
		if err == nil {
			err = baton.Init(ctx, cfg)
			if changed && errors.Is(err, locking.ErrMarked) {
				// a deployment in use that moved to a new layout: its
				// masters are marked already, as they should be
				fmt.Fprintln(stdout, "the lock masters carry their markers already: left as they are")
				return 0
			}
		}
		if err != nil {
			err = errors.New(cfg.MaskSecrets(err.Error()))
		}
	}
	var ue *usageError
	switch {
	case errors.As(err, &ue):
		return usageExit("init", err, stderr)
	case err != nil:
		printf(stderr, "baton init: %v\n", err) // replica ids read from Redis
		return 1
	}
	fmt.Fprintln(stdout, "marked the lock masters as a brand-new set: they vote at once")
	return 0
}

// initLayout records cfg's layout (baton.InitLayout), moving the runtime
// schedules when the shard count changes, with progress on stdout; changed
// tells that the layout recorded before was another.
func initLayout(cfg *config.Config, stdout io.Writer) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), layoutTimeout)
	defer cancel()
	last := time.Now()
	rep, err := baton.InitLayout(ctx, cfg, func(moved int) {
		if time.Since(last) >= time.Second {
			last = time.Now()
			fmt.Fprintf(stdout, "moving the runtime schedules to their new shards: %d moved\n", moved)
		}
	})
	if err != nil {
		return false, err
	}
	changed := rep.From != rep.To
	if rep.Recorded {
		fmt.Fprintf(stdout, "recorded the layout of namespace %q: schedules.shards %d, worker.lanes %d", cfg.Namespace, rep.To.Shards, rep.To.Lanes)
		if changed {
			fmt.Fprintf(stdout, " (was %d and %d; %d runtime schedules moved)", rep.From.Shards, rep.From.Lanes, rep.Moved)
		}
		fmt.Fprintln(stdout)
	}
	return changed, nil
}

// layoutTimeout bounds baton init's move of the runtime schedules to a
// new layout (three round trips per schedule; not yet measured at a
// million).
const layoutTimeout = 30 * time.Minute

// initLockMasters marks the masters of baton lock --redis.
func initLockMasters(ctx context.Context, urls []string, prefix, passwordFile string) error {
	password, _, err := redisPassword(passwordFile)
	if err != nil {
		return err
	}
	var rdbs []redis.UniversalClient
	defer func() {
		for _, r := range rdbs {
			_ = r.Close()
		}
	}()
	for _, raw := range urls {
		opts, err := redisurl.Parse(raw)
		if err != nil {
			return usagef("bad Redis URL %s: %v", redact.URL(raw), err)
		}
		if opts.Password == "" {
			opts.Password = password
		}
		opts.ContextTimeoutEnabled = true
		rdbs = append(rdbs, redis.NewClient(opts))
	}
	c, err := locking.NewQuorum(rdbs, locking.WithPrefix(prefix))
	if err != nil {
		return usagef("%v", err)
	}
	defer c.Close()
	return c.InitFresh(ctx)
}
