// Command baton is the command-line front end of the baton job scheduler.
//
// Subcommands:
//
//	baton run [flags]                      scheduler + worker: one replica
//	baton scheduler [flags]                the scheduler alone
//	baton worker [flags]                   the worker alone
//	baton dev [flags]                      embedded Redis + 3 replicas in one process
//	baton validate [--config FILE] [FILE]  check a config file
//	baton next [-n N] [--job NAME] [--from TIME]  the next fire times
//	baton pause [--note TEXT] [--by NAME] JOB...   pause jobs everywhere, saying why
//	baton resume [--skip | --catch-up] JOB...      resume them (replaying paused ticks)
//	baton status [--config FILE]                   singleton holders, paused jobs
//	baton history [-n N] [--json] JOB              a job's newest runs
//	baton locks [--config FILE] [--json]           the locks held now
//	baton trigger [--config FILE] JOB...           run jobs once now, by hand
//	baton backfill --from T --to T [--dry-run] JOB  run the ticks in a window that never ran
//	baton lock [flags] KEY -- CMD [ARGS]   run CMD while holding a distributed lock
//	baton version                          print the version
//	baton help [COMMAND]                   print help
//
// The binary is deliberately thin: it parses flags, sets up logging and
// signals, and prints; replicas are built by package baton (baton.New), the
// same call a Go program makes.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/batonhq/baton"
)

// mainUsage is the top-level help text.
const mainUsage = `usage: baton <command> [arguments]

commands:
  run        run a replica: scheduler and worker
  scheduler  run the scheduler alone (claims and dispatches ticks)
  worker     run the worker alone (runs the queued jobs)
  dev        embedded Redis and 3 replicas in one process, zero set-up
  validate   check a config file
  next       print the next fire times of the jobs
  status     every job (next tick, last run, paused, lock) and every replica
  history    a job's newest runs: when, where, how they ended, and why
  locks      the locks held now: holder count, fence, remaining ttl
  trigger    run jobs once now, by hand (through the queue, as a tick is)
  backfill   run a job's ticks in a past window that never ran, each once
  pause      pause jobs on every replica (a flag in Redis)
  resume     resume paused jobs
  lock       run a command while holding a distributed lock (a flock(1) for crontabs)
  version    print the version
  help       print help; "baton help COMMAND" for a command's flags

Common flags of run, scheduler, worker and dev (each also from the
environment): --config FILE ($BATON_CONFIG, default baton.yaml; dev:
config.example.yaml), --id ID ($BATON_ID, default host-pid), --http ADDR
($BATON_HTTP, overrides http.listen), --log-format json|console
($BATON_LOG_FORMAT), --log-level LEVEL ($BATON_LOG_LEVEL).
`

func main() {
	harden() // before anything: jobs must not read baton's memory or environment
	// exec jobs run under this binary as their supervisor: become one if asked
	baton.MaybeRunSupervisor()
	// go-redis logs dial failures on its own; baton reports them once, itself.
	redis.SetLogger(quietLogger{})
	zerolog.TimeFieldFormat = time.RFC3339Nano
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the baton command line args (without the program name),
// writing to stdout and stderr, and returns the process exit status. It is
// main without os.Exit, so tests can call it in-process.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, mainUsage)
		return exitUsage
	}
	switch args[0] {
	case "run":
		return runServe(baton.RoleAll, args[1:], stdout, stderr)
	case "scheduler":
		return runServe(baton.RoleScheduler, args[1:], stdout, stderr)
	case "worker":
		return runServe(baton.RoleWorker, args[1:], stdout, stderr)
	case "dev":
		return runDev(args[1:], stdout, stderr)
	case "validate":
		return runValidate(args[1:], stdout, stderr)
	case "status":
		return runStatus(args[1:], stdout, stderr)
	case "history":
		return runHistory(args[1:], stdout, stderr)
	case "locks":
		return runLocks(args[1:], stdout, stderr)
	case "trigger":
		return runTrigger(args[1:], stdout, stderr)
	case "backfill":
		return runBackfill(args[1:], stdout, stderr)
	case "pause":
		return runPause("pause", true, args[1:], stdout, stderr)
	case "resume":
		return runPause("resume", false, args[1:], stdout, stderr)
	case "next":
		return runNext(args[1:], stdout, stderr)
	case "lock":
		return runLock(args[1:], stdout, stderr)
	case "version", "-version", "--version":
		return runVersion(args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		return runHelp(args[1:], stdout, stderr)
	default:
		fmt.Fprintf(stderr, "baton: unknown command %q\n", args[0])
		fmt.Fprint(stderr, mainUsage)
		return exitUsage
	}
}

// runHelp prints the help of the named command, or the top-level help.
func runHelp(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stdout, mainUsage)
		return 0
	}
	switch args[0] {
	case "run", "scheduler", "worker", "dev", "validate", "next", "lock", "pause", "resume", "status", "history", "locks", "trigger", "backfill":
		return run([]string{args[0], "-h"}, stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, "usage: baton version\n\nPrints the baton version and the Go version it was built with.")
		return 0
	case "help":
		fmt.Fprint(stdout, mainUsage)
		return 0
	default:
		fmt.Fprintf(stderr, "baton help: unknown command %q\n", args[0])
		fmt.Fprint(stderr, mainUsage)
		return exitUsage
	}
}

// quietLogger discards go-redis's internal log lines.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}
