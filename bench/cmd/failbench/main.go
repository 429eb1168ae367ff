// Command failbench measures how fast a mode: singleton job moves to another
// replica: 3 `baton run` processes (the real binary, built by this command)
// share one singleton exec job that appends "pid fence unix-ns replica" to a
// file every 20ms, on a redis-server started by the command.
//
//	cd bench && go run ./cmd/failbench            # full run, ~7 minutes
//	cd bench && go run ./cmd/failbench -quick     # smoke run: 3 reps, ttl 2s
//
// For every lock_ttl it measures, -reps times each:
//
//   - failover: SIGKILL the holder's baton process; time from the kill to
//     the first heartbeat of the next term (the killed replica is restarted;
//     each kill comes at a random point, uniform in [0, ttl), after it);
//   - handoff: SIGTERM the holder; time from its "resigned" log line (and,
//     separately, from the SIGTERM) to the first heartbeat of the next term.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/batonhq/baton/internal/redistest"
)

func main() {
	cfg := config{}
	flag.IntVar(&cfg.reps, "reps", 20, "repetitions of every measurement")
	ttls := flag.String("ttls", "2s,10s", "comma-separated lock_ttl values")
	quick := flag.Bool("quick", false, "smoke run: 3 reps, ttl 2s only (explicit flags win)")
	flag.StringVar(&cfg.out, "out", "results/singleton.md", "where to write the markdown report")
	flag.BoolVar(&cfg.keep, "keep", false, "keep the work directory (logs, heartbeat files)")
	flag.Parse()
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *quick {
		if !set["reps"] {
			cfg.reps = 3
		}
		if !set["ttls"] {
			*ttls = "2s"
		}
	}
	for _, s := range strings.Split(*ttls, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil || d < time.Second {
			fatal(fmt.Errorf("-ttls: %q: want durations >= 1s", s))
		}
		cfg.ttls = append(cfg.ttls, d)
	}
	if cfg.reps < 1 {
		fatal(fmt.Errorf("-reps must be positive"))
	}
	cfg.args = os.Args[1:]
	if err := run(cfg); err != nil {
		fatal(err)
	}
}

type config struct {
	reps int
	ttls []time.Duration
	out  string
	keep bool
	args []string
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "failbench:", err)
	os.Exit(1)
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, time.Now().Format("15:04:05 ")+format+"\n", args...)
}

func run(cfg config) error {
	began := time.Now()
	dir, err := os.MkdirTemp("", "failbench-")
	if err != nil {
		return err
	}
	if cfg.keep {
		logf("work directory: %s", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	bin, err := buildBaton(dir)
	if err != nil {
		return err
	}
	srv, err := redistest.Start()
	if err != nil {
		return err
	}
	defer srv.Close()
	logf("redis-server on %s; baton built at %s", srv.Addr(), bin)

	var results []*ttlResult
	for i, ttl := range cfg.ttls {
		r, err := measureTTL(bin, filepath.Join(dir, fmt.Sprintf("ttl%d", i)), srv.Addr(), fmt.Sprintf("failbench%d", i), ttl, cfg.reps)
		if err != nil {
			return fmt.Errorf("lock_ttl %v: %w", ttl, err)
		}
		results = append(results, r)
	}
	logf("done in %v", time.Since(began).Round(time.Second))
	report := makeReport(results, cfg, began)
	fmt.Print(report)
	if err := os.MkdirAll(filepath.Dir(cfg.out), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(cfg.out, []byte(report), 0o644); err != nil {
		return err
	}
	logf("wrote %s", cfg.out)
	return nil
}
