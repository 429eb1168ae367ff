package main

import (
	"fmt"
	"io"
	"os"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/wiring"
)

const devHelp = `usage: baton dev [flags]

Runs a whole cluster in one process with zero set-up: an embedded
Redis-compatible server (miniredis, in memory, on a random 127.0.0.1 port)
and several replicas (scheduler + worker each, ids dev-1, dev-2, ...) over
the config's jobs (default config.example.yaml), with redis.url and
locking.masters pointed at the embedded server. The log shows which replica
dispatched and which ran each tick. Ctrl-C stops everything.

Before it loads the config it creates a directory of its own for this run
and sets $BATON_DEV_DIR to it (unless set): config.example.yaml's jobs
write their logs there, so two baton dev runs on one host do not mix. The
first log line names it; it is left in place for reading.

For trying configs out, not for production: nothing survives a restart.
The embedded server is only in a binary built with the "dev" build tag
(go run -tags dev ./cmd/baton dev, or make dev); the production binary
carries none.

flags:
`

// devDirEnv names the directory of one baton dev run, where
// config.example.yaml's jobs write their logs.
const devDirEnv = "BATON_DEV_DIR"

// devDir returns $BATON_DEV_DIR, first creating a new directory and setting
// the variable to it when it is not set, before the config (which expands
// it) is loaded.
func devDir() (string, error) {
	if dir := os.Getenv(devDirEnv); dir != "" {
		return dir, nil
	}
	dir, err := os.MkdirTemp("", "baton-dev-")
	if err != nil {
		return "", fmt.Errorf("a directory for this run's job logs: %w", err)
	}
	return dir, os.Setenv(devDirEnv, dir)
}

// devOpts are the flags of "baton dev".
type devOpts struct {
	commonOpts
	n *int
}

// defineDev defines the flags of "baton dev".
func defineDev(fs *flagSet) devOpts {
	cf, finish := addCommon(fs, defaultDevConfigFile)
	n := fs.Int("replicas", 3, "number of replicas (1..9)")
	return devOpts{commonOpts{cf, finish}, n}
}

// runDev implements "baton dev".
func runDev(fs *flagSet, o devOpts, args []string, stdout, stderr io.Writer) int {
	cf, n := o.cf, o.n
	if *n < 1 || *n > 9 {
		return usageExit("dev", usagef("--replicas %d: want 1..9", *n), stderr)
	}
	if !hasEmbedded {
		_, _, err := startEmbedded()
		fmt.Fprintf(stderr, "baton dev: %v\n", err)
		return 1
	}
	if err := o.finish(args); err != nil {
		return usageExit("dev", err, stderr)
	}
	prefix := "dev"
	if fs.isSet("id") {
		prefix = cf.id
	}
	if cf.logFormat == "" {
		cf.logFormat = logFormatConsole
	}
	dir, err := devDir()
	if err != nil {
		fmt.Fprintf(stderr, "baton dev: %v\n", err)
		return 1
	}
	cfg, err := loadConfigFile(fs, cf.config)
	if err != nil {
		return usageExit("dev", err, stderr)
	}
	addr, err := httpListen(fs, cf, cfg)
	if err != nil {
		return usageExit("dev", err, stderr)
	}
	zl := newZerolog(stderr, cf.logFormat, cf.logLevel)
	log := newSlog(zl, cfg.SecretValues())

	url, stopEmbedded, err := startEmbedded()
	if err != nil {
		log.Error("cannot start the embedded Redis", "err", err)
		return 1
	}
	defer stopEmbedded()
	cfg.Redis = config.RedisConfig{URL: url}
	cfg.Locking.Masters = nil
	// the embedded server is new at every start and reports no run_id: it is
	// a brand-new deployment each time, nothing to wait out
	cfg.Locking.FreshDeployment = true

	ids := make([]string, *n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%d", prefix, i+1)
	}
	log.Info("baton dev: embedded Redis and replicas in one process; Ctrl-C stops",
		"version", versionString(), "redis", cfg.Redis.URL, "replicas", fmt.Sprint(ids),
		"config", cf.config, "jobs", len(cfg.Jobs), devDirEnv, dir)
	warnUnsigned(cfg, log)
	tp, flushTraces, err := tracesFromEnv(log)
	if err != nil {
		log.Error("cannot set up traces", "err", err)
		return 1
	}
	defer flushTraces()
	var replicas []*baton.Replica
	for _, id := range ids {
		rlog := log.With("replica", id)
		rp, err := baton.New(cfg, baton.WithReplicaID(id), baton.WithLogger(rlog), baton.WithVersion(shortVersion()), baton.WithHTTPServed(),
			baton.WithLockMessageFilter(wiring.WithoutConfigCommand), baton.WithTracerProvider(tp))
		if err != nil {
			log.Error("cannot build a replica", "replica", id, "err", err)
			for _, r := range replicas {
				r.Close()
			}
			return 1
		}
		replicas = append(replicas, rp)
	}
	units := make([]unit, len(replicas))
	for i, rp := range replicas {
		units[i] = rp
	}
	return serve(units, addr, true, log, zl)
}
