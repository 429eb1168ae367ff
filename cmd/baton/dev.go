package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"gopkg.in/yaml.v3"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/wiring"
	"github.com/batonhq/baton/jobs"
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

The replicas register one Go handler, "report", which logs its run and
payload: runtime schedules can name it (baton schedules put report/t-1
--schedule "@every 10s" --handler report --payload '{"tenant": 1}'
--config $BATON_DEV_DIR/baton.yaml).

For trying configs out, not for production: nothing survives a restart.
The embedded server is only in a binary built with the "dev" build tag
(go run -tags dev ./cmd/baton dev, or make dev); the production binary
carries none.

flags:
`

// devCLIConfig writes path's config, with redis.url set to url and
// locking.fresh_deployment on (the embedded server is brand new at every
// start and reports no run_id), as dir/baton.yaml, and returns its path:
// the config that other commands (baton status, history, pause) take to
// reach this run. The file keeps path's text otherwise (its ${VAR}s too).
func devCLIConfig(path, dir, url string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return "", fmt.Errorf("%s: not a YAML mapping", path)
	}
	root := doc.Content[0]
	yamlSet(root, "redis", &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{yamlScalar("url"), yamlScalar(url)}})
	locking := yamlGet(root, "locking")
	if locking == nil || locking.Kind != yaml.MappingNode {
		locking = &yaml.Node{Kind: yaml.MappingNode}
		yamlSet(root, "locking", locking)
	}
	yamlSet(locking, "fresh_deployment", &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: "true"})
	yamlDel(locking, "masters")
	out, err := yaml.Marshal(&doc)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	cli := filepath.Join(dir, "baton.yaml")
	header := "# baton dev's config for the other commands: " + path + " pointed at this run's embedded server\n"
	return cli, os.WriteFile(cli, append([]byte(header), out...), 0o600)
}

func yamlScalar(v string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Value: v} }

// yamlGet, yamlSet and yamlDel read and write key of mapping node m.
func yamlGet(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

func yamlSet(m *yaml.Node, key string, v *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content[i+1] = v
			return
		}
	}
	m.Content = append(m.Content, yamlScalar(key), v)
}

func yamlDel(m *yaml.Node, key string) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content = append(m.Content[:i], m.Content[i+2:]...)
			return
		}
	}
}

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
	// the other commands (status, history, pause, ...) against this run: the
	// config pointed at the embedded server, as the replicas use it
	if cli, err := devCLIConfig(cf.config, dir, url); err != nil {
		log.Warn("cannot write the config for the other commands", "err", err)
	} else {
		log.Info("baton dev: in another terminal, the other commands take this run's config: bin/baton status --config " + cli + " (make build makes bin/baton)")
	}
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
			baton.WithHandlers(devHandlers(rlog)),
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

// devHandlers are the Go handlers baton dev's replicas register: "report",
// which logs its run, for the runtime schedules of the docs' examples.
func devHandlers(log *slog.Logger) *jobs.Registry {
	reg := jobs.NewRegistry()
	_ = reg.HandleFunc("report", func(_ context.Context, run jobs.Run) error {
		log.Info("report handler ran (baton dev's demo handler)", "job", run.Job, "tick", run.Tick, "payload", string(run.Payload))
		return nil
	})
	return reg
}
