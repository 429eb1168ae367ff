package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/pflag"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/childenv"
	"github.com/batonhq/baton/internal/locknames"
	"github.com/batonhq/baton/internal/redact"
	"github.com/batonhq/baton/internal/redisurl"
	"github.com/batonhq/baton/internal/wiring"
)

// Defaults of "baton lock".
const (
	defaultRedisURL = "redis://127.0.0.1:6379/0"
	defaultTTL      = 30 * time.Second
	defaultGrace    = 10 * time.Second
	defaultPrefix   = "baton:lock:"
	releaseTimeout  = 5 * time.Second
	envRedisURL     = "BATON_REDIS_URL"
	envRedisAuth    = "REDISCLI_AUTH"
	envLockKey      = "BATON_LOCK_KEY"
	envFencingToken = "BATON_FENCING_TOKEN"
)

const lockUsageLine = "usage: baton lock [--redis URL]... [--redis-password-file FILE] [--config FILE] [--ttl D] [--wait D] [--grace D] [--fair] [--max N | --shared | --exclusive] [--prefix P] KEY -- CMD [ARGS]"

const lockHelp = lockUsageLine + `

Runs CMD (no shell) while holding the distributed lock KEY, like flock(1)
across machines. A KEY that starts with "-" follows a first "--":
baton lock [flags] -- KEY -- CMD. The lease is extended every ttl/3 while CMD runs. CMD gets
BATON_LOCK_KEY and BATON_FENCING_TOKEN (strictly increasing across holders)
in its environment (of baton's own environment only PATH, HOME, LANG, LC_*,
TZ and USER, and what --inherit-env names: baton's may hold a Redis
password) and runs in its own process group (so it cannot read from
a terminal); SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 sent to
baton are forwarded to that group. CMD runs under baton's supervisor, which
knows the lease's deadline: if the lock is lost, or baton itself stops
extending it (frozen, starved), the group gets SIGTERM up to --grace before
the deadline and SIGKILL just before it, so CMD never outlives the lock;
baton then exits 76. Linux only.

With --max N, KEY is a semaphore: up to N commands hold it at once (each
holds one of N slots, a lock of its own, with the same lease, fencing and
supervision), and the next waits (--wait) or exits 75; with --fair too,
waiters are served in order (one master only).

With --shared or --exclusive, KEY is a read/write lock: any number of
--shared commands hold it at once, an --exclusive one alone. A waiting
--exclusive command keeps new --shared ones out, so it is not starved.
(A plain KEY, without these flags, is a different lock.)

Each --redis URL (redis:// or rediss://, with user, password, db) is one
independent master; several masters form a Redlock quorum. Without --redis:
locking.masters, then redis.url from --config, then $BATON_REDIS_URL, then
` + defaultRedisURL + `. A URL without a password gets the first line of
--redis-password-file, else $REDISCLI_AUTH: a password there stays out of
the command line that ps shows. --config reads the redis, locking and
namespace sections of a baton config as every command does (${VAR}
expanded, validated); the jobs are not read.

Brand-new masters grant no lock for their restart quarantine (default 1m,
--restart-quarantine): Redis cannot tell a new server from one restarted
empty, so baton lock exits 69 meanwhile, saying until when. Mark a brand-new
set once, before first use, with baton init --redis URL (the same URLs and
--prefix; for --config: baton init --config FILE) and it grants at once.

Exit status: CMD's status (128+N if killed by signal N); 2 usage error;
69 Redis unavailable; 75 lock busy; 76 lock lost while CMD ran (CMD stopped);
126 CMD not executable; 127 CMD not found.

flags:
`

// masterURL is one Redis master named on the command line, in the config
// file or in the environment.
type masterURL struct {
	raw    string // as given; may hold a password, never print it
	source string // where it came from, for messages
	opts   *redis.Options
}

// lockConfig is the parsed command line of "baton lock".
type lockConfig struct {
	key     string
	argv    []string
	masters []masterURL
	ttl     time.Duration
	wait    time.Duration
	grace   time.Duration
	fair    bool
	max     int  // > 1: a semaphore of max slots
	shared  bool // a read share of the read/write lock KEY
	excl    bool // the write lock of the read/write lock KEY
	prefix  string
	// the lock masters' restart handling, as baton run uses them
	quarantine time.Duration
	fresh      bool
	inherit    []string // more of baton's environment for CMD (childenv patterns)
	secrets    []string // the config's ${VAR} values, scrubbed from messages
}

// usageError is a command-line or configuration mistake: exit 2.
type usageError struct{ msg string }

// Error returns the message, without the usage line.
func (e *usageError) Error() string { return e.msg }

// usagef returns a usageError.
func usagef(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

// lockFlags are the flags of "baton lock" as parsed, before finish checks
// them and resolves the masters.
type lockFlags struct {
	cfg          lockConfig // ttl, wait, grace, fair, max, shared, excl, prefix, quarantine, fresh
	urls         []string
	inherit      []string
	configFile   string
	passwordFile string
}

// defineLock defines the flags of "baton lock" on fs.
func defineLock(fs *pflag.FlagSet) *lockFlags {
	lf := &lockFlags{}
	cfg := &lf.cfg
	fs.StringArrayVar(&lf.urls, "redis", nil, "Redis master `URL`; repeat for a quorum of independent masters")
	fs.StringVar(&lf.configFile, "config", "", "baton YAML config `FILE` (reads its redis, locking and namespace sections; ${VAR} expanded)")
	fs.StringVar(&lf.passwordFile, "redis-password-file", "", "read the Redis password from the first line of `FILE` (for URLs without one; else $"+envRedisAuth+")")
	fs.DurationVar(&cfg.ttl, "ttl", defaultTTL, "lease ttl; extended every ttl/3 while CMD runs")
	fs.DurationVar(&cfg.wait, "wait", 0, "how long to wait for the lock; 0 tries once")
	fs.DurationVar(&cfg.grace, "grace", defaultGrace, "after losing the lock, time between SIGTERM and SIGKILL of CMD")
	fs.BoolVar(&cfg.fair, "fair", false, "wait in FIFO order (single master only)")
	fs.IntVar(&cfg.max, "max", 1, "let up to `N` commands hold KEY at once (a semaphore slot each)")
	fs.BoolVar(&cfg.shared, "shared", false, "hold a share of the read/write lock KEY: shared holders run together, never beside an --exclusive one")
	fs.BoolVar(&cfg.excl, "exclusive", false, "hold the read/write lock KEY alone (no --shared holder runs meanwhile)")
	fs.StringVar(&cfg.prefix, "prefix", defaultPrefix, "prefix of the lock's Redis keys")
	fs.DurationVar(&cfg.quarantine, "restart-quarantine", time.Minute, "how long a lock master that restarted grants nothing, from its start (at least --ttl)")
	fs.StringArrayVar(&lf.inherit, "inherit-env", nil, "pass baton's environment variable `NAME` on to CMD (a name, a prefix ending in *, or * for all; repeatable); CMD always gets "+strings.Join(childenv.Default, ", "))
	fs.BoolVar(&cfg.fresh, "fresh-deployment", false, "deprecated (use baton init --redis URL once): masters with no marker vote at once at every start, so masters that all restart empty lose restart safety")
	return lf
}

// parseLock parses the arguments of "baton lock", as the command does. help
// is true when -h was given (the help text has been written to stdout).
func parseLock(args []string, stdout io.Writer) (cfg lockConfig, help bool, err error) {
	fs := pflag.NewFlagSet("baton lock", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	lf := defineLock(fs)
	err = fs.Parse(goStyleFlags(fs, args))
	if errors.Is(err, pflag.ErrHelp) {
		fmt.Fprint(stdout, lockHelp)
		fmt.Fprint(stdout, fs.FlagUsages())
		return cfg, true, err
	}
	if err != nil {
		return cfg, false, usagef("%s", flagErrorText(fs, "lock", err, nil))
	}
	cfg, err = lf.finish(fs, fs.Args(), fs.ArgsLenAtDash())
	return cfg, false, err
}

// finish checks the parsed flags of fs and the positional arguments args,
// of which those from dash on came after "--" (dash -1: no "--"), and
// resolves the masters.
func (lf *lockFlags) finish(fs *pflag.FlagSet, args []string, dash int) (lockConfig, error) {
	cfg := lf.cfg
	before, after := args, []string(nil)
	if dash >= 0 {
		before, after = args[:dash], args[dash:]
	}
	if dash == 0 {
		// baton lock [flags] -- KEY -- CMD: a KEY that starts with "-"
		if i := slices.Index(after, "--"); i == 1 {
			before, after = after[:1], after[2:]
			dash = 1
		}
	}
	if len(before) == 0 {
		return cfg, usagef("missing KEY")
	}
	cfg.key = before[0]
	if cfg.key == "" {
		return cfg, usagef("KEY is empty")
	}
	if locknames.Internal(cfg.key) {
		return cfg, usagef("KEY %q is a name baton uses for its own leases (exec:JOB, fence:JOB, singleton:JOB, %s); pick another", cfg.key, locknames.ClusterLeader)
	}
	if dash < 0 {
		if len(before) == 1 {
			return cfg, usagef("missing -- CMD after KEY %q", cfg.key)
		}
		return cfg, usagef("missing -- between KEY %q and CMD", cfg.key)
	}
	if len(before) > 1 {
		return cfg, usagef("unexpected argument %q between KEY and --", before[1])
	}
	cfg.argv = after
	if len(cfg.argv) == 0 || cfg.argv[0] == "" {
		return cfg, usagef("missing CMD after --")
	}

	switch {
	case cfg.ttl <= 0:
		return cfg, usagef("--ttl %v must be positive", cfg.ttl)
	case cfg.wait < 0:
		return cfg, usagef("--wait %v must not be negative", cfg.wait)
	case cfg.grace < 0:
		return cfg, usagef("--grace %v must not be negative", cfg.grace)
	case cfg.max < 1:
		return cfg, usagef("--max %d must be at least 1", cfg.max)
	case cfg.shared && cfg.excl:
		return cfg, usagef("--shared and --exclusive do not go together: pick one side of the read/write lock")
	case (cfg.shared || cfg.excl) && cfg.max > 1:
		return cfg, usagef("--max does not go with --shared or --exclusive: a read/write lock has no slots")
	case (cfg.shared || cfg.excl) && cfg.fair:
		return cfg, usagef("--fair does not go with --shared or --exclusive: a read/write lock prefers its writers instead")
	}
	for _, p := range lf.inherit {
		if err := childenv.Check(p); err != nil {
			return cfg, usagef("--inherit-env: %v", err)
		}
	}
	cfg.inherit = lf.inherit

	set := map[string]bool{}
	fs.Visit(func(f *pflag.Flag) { set[f.Name] = true })
	prefixSet := set["prefix"]

	// masters: --redis, else the config file, else $BATON_REDIS_URL, else the default
	var raws []string
	source := "--redis"
	if len(lf.urls) > 0 {
		raws = lf.urls
	}
	if configFile := lf.configFile; configFile != "" {
		fc, err := loadConfig(configFile)
		if err != nil {
			return cfg, err
		}
		if raws == nil {
			switch {
			case len(fc.Locking.Masters) > 0:
				raws, source = fc.Locking.Masters, "locking.masters in "+configFile
			case fc.Redis.URL != "":
				raws, source = []string{fc.Redis.URL}, "redis.url in "+configFile
			}
		}
		if !prefixSet && fc.Namespace != "" {
			cfg.prefix = wiring.LockPrefix(fc)
		}
		if !set["restart-quarantine"] && fc.Locking.RestartQuarantine > 0 {
			cfg.quarantine = fc.Locking.RestartQuarantine
		}
		cfg.fresh = cfg.fresh || fc.Locking.FreshDeployment
		cfg.secrets = fc.SecretValues()
	}
	password, passwordSource, err := redisPassword(lf.passwordFile)
	if err != nil {
		return cfg, err
	}
	if raws == nil {
		if env := os.Getenv(envRedisURL); env != "" {
			raws, source = []string{env}, "$"+envRedisURL
		} else {
			raws, source = []string{defaultRedisURL}, "default"
		}
	}
	seen := map[string]string{}
	for _, raw := range raws {
		opts, err := redisurl.Parse(raw) // its errors hold no part of the URL
		if err != nil {
			return cfg, usagef("bad Redis URL %s (%s): %v", redact.URL(raw), source, err)
		}
		if prev, dup := seen[opts.Addr]; dup {
			return cfg, usagef("Redis master %s (%s) is listed twice (also as %s); quorum masters must be independent servers", opts.Addr, source, redact.URL(prev))
		}
		seen[opts.Addr] = raw
		src := source
		if opts.Password == "" && password != "" {
			opts.Password = password
			src += " with the password of " + passwordSource
		}
		// let the lock library's per-call deadlines bound every network call
		opts.ContextTimeoutEnabled = true
		cfg.masters = append(cfg.masters, masterURL{raw: raw, source: src, opts: opts})
	}
	return cfg, nil
}

// loadConfig loads the redis, locking and namespace sections of a baton
// config file as every other command loads them (${VAR} expanded,
// validated); the jobs are not read, so a crontab need not have their
// variables.
func loadConfig(path string) (*config.Config, error) {
	cfg, err := config.LoadConnectionFile(path)
	if err == nil {
		return cfg, nil
	}
	var ce *config.Error
	if errors.As(err, &ce) {
		return nil, usagef("config: %s", strings.ReplaceAll(ce.Error(), "\n", "; "))
	}
	return nil, usagef("config: %s", strings.TrimPrefix(err.Error(), "config: "))
}

// redisPassword returns the password for masters whose URL carries none:
// the first line of --redis-password-file, else $REDISCLI_AUTH (as
// redis-cli reads it), else "". source names where it came from.
func redisPassword(file string) (password, source string, err error) {
	if file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return "", "", usagef("--redis-password-file: %v", err)
		}
		p, _, _ := strings.Cut(string(data), "\n")
		p = strings.TrimSuffix(p, "\r")
		if p == "" {
			return "", "", usagef("--redis-password-file %s: the first line is empty", file)
		}
		return p, "--redis-password-file", nil
	}
	if p := os.Getenv(envRedisAuth); p != "" {
		return p, "$" + envRedisAuth, nil
	}
	return "", "", nil
}
