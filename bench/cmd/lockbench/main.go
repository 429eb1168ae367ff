// Command lockbench compares baton's locking package with redsync and
// bsm/redislock on real redis-server processes it starts itself, and writes a
// markdown report (tables plus a machine description).
//
//	cd bench && go run ./cmd/lockbench            # full run, a few minutes
//	cd bench && go run ./cmd/lockbench -quick     # smoke run
//
// Cells (see bench/README.md): A uncontended lock+unlock pairs/s on one
// master against a hand-written floor; B the same on 3 and 5 masters (baton's
// quorum against redsync); C eight goroutines contending for one key.
// Every repetition runs every cell and rotates the order of the libraries;
// the report gives the median and min–max over repetitions.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/batonhq/baton/internal/redistest"
)

func main() {
	cfg := config{}
	flag.IntVar(&cfg.reps, "reps", 5, "repetitions of every cell")
	flag.DurationVar(&cfg.duration, "duration", 2*time.Second, "measurement window of every cell")
	flag.DurationVar(&cfg.timeout, "timeout", 5*time.Second, "deadline of each lock attempt in the contended cells")
	quick := flag.Bool("quick", false, "smoke run: 250ms cells, 1 repetition, 1s attempt deadline (explicit flags win)")
	flag.StringVar(&cfg.out, "out", "results/locking.md", "where to write the markdown report")
	flag.Parse()
	if *quick {
		set := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if !set["reps"] {
			cfg.reps = 1
		}
		if !set["duration"] {
			cfg.duration = 250 * time.Millisecond
		}
		if !set["timeout"] {
			cfg.timeout = time.Second
		}
	}
	if cfg.reps < 1 || cfg.duration <= 0 || cfg.timeout <= 0 {
		fatal(fmt.Errorf("-reps, -duration and -timeout must be positive"))
	}
	cfg.args = os.Args[1:]
	if err := run(cfg); err != nil {
		fatal(err)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "lockbench:", err)
	os.Exit(1)
}

// config is the command line.
type config struct {
	reps     int
	duration time.Duration
	timeout  time.Duration
	out      string
	args     []string
}

func run(cfg config) error {
	servers, err := startServers(maxMasters)
	defer func() {
		for _, s := range servers {
			_ = s.Close()
		}
	}()
	if err != nil {
		return err
	}
	addrs := make([]string, len(servers))
	for i, s := range servers {
		addrs[i] = s.Addr()
	}
	b, err := newBench(cfg, addrs)
	if err != nil {
		return err
	}
	defer b.close()

	began := time.Now()
	for rep := range cfg.reps {
		if err := b.repetition(rep); err != nil {
			return err
		}
	}
	logf("all repetitions done in %v", time.Since(began).Round(time.Second))

	report := b.report(describeMachine(cfg, began))
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

// startServers starts n redis-servers; on error it returns those started.
func startServers(n int) ([]*redistest.Server, error) {
	var out []*redistest.Server
	for range n {
		s, err := redistest.Start()
		if err != nil {
			return out, err
		}
		out = append(out, s)
	}
	logf("started %d redis-server instances", n)
	return out, nil
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, time.Now().Format("15:04:05 ")+format+"\n", args...)
}
