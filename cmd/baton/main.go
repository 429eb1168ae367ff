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
//	baton next SPEC [--tz ZONE] [-n N]     the next fire times of a bare spec
//	baton pause [--note TEXT] [--by NAME] JOB...   pause jobs everywhere, saying why
//	baton resume [--skip | --catch-up] JOB...      resume them (replaying paused ticks)
//	baton skip [--next N | --tick T] JOB           skip a job's next ticks, saying why
//	baton status [--config FILE]                   singleton holders, paused jobs
//	baton history [-n N] [--json] JOB              a job's newest runs
//	baton ticks [--from T] [--to T] [--json] JOB   every tick of a window and its outcome
//	baton locks [--config FILE] [--json]           the locks held now
//	baton trigger [--config FILE] JOB...           run jobs once now, by hand
//	baton schedules put|get|list|delete|pause|resume  schedules made at runtime
//	baton backfill --from T --to T [--dry-run] JOB  run the ticks in a window that never ran
//	baton lock [flags] KEY -- CMD [ARGS]   run CMD while holding a distributed lock
//	baton init [--config FILE | --redis URL...]  mark brand-new lock masters once
//	baton version                          print the version
//	baton completion bash|zsh|fish         a shell completion script
//	baton help [COMMAND]                   print help
//
// The binary is deliberately thin: it parses flags, sets up logging and
// signals, and prints; replicas are built by package baton (baton.New), the
// same call a Go program makes.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
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
  next       print the next fire times of the jobs, or of a bare spec
  status     every job (next tick, last run, paused, lock) and every replica
  history    a job's newest runs: when, where, how they ended, and why
  ticks      every tick of a job in a window and what became of it (the tick ledger)
  locks      the locks held now: holder count, fence, remaining ttl
  trigger    run jobs once now, by hand (through the queue, as a tick is)
  backfill   run a job's ticks in a past window that never ran, each once
  pause      pause jobs on every replica (a flag in Redis)
  resume     resume paused jobs
  skip       skip a job's next ticks (or the ticks named), saying why
  schedules  schedules made at runtime: put, get, list, delete, pause, resume
  lock       run a command while holding a distributed lock (a flock(1) for crontabs)
  init       mark a brand-new set of lock masters once, so they skip the restart quarantine
  version    print the version and the commit it was built from
  completion print a shell completion script: baton completion bash|zsh|fish
  help       print help; "baton help COMMAND" for a command's flags

Flags go before or after a command's arguments ("--" ends them).

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
	case "-h", "-help", "--help":
		args = append([]string{"help"}, args[1:]...)
	case "-version", "--version":
		args = append([]string{"version"}, args[1:]...)
	}
	c := &cli{stdout: stdout, stderr: stderr}
	root := newRoot(c)
	if sub, _, err := root.Find(args); err == nil && sub != root {
		args = goStyleFlags(sub.Flags(), args)
	}
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	var fe *flagError
	switch {
	case err != nil && cmd == root:
		if strings.HasPrefix(args[0], "-") {
			fmt.Fprintf(stderr, "baton: %q before the command: flags come after it, as in baton status --config FILE\n", args[0])
		} else {
			fmt.Fprintf(stderr, "baton: unknown command %q\n", args[0])
			if s := root.SuggestionsFor(args[0]); len(s) > 0 {
				fmt.Fprintf(stderr, "did you mean baton %s?\n", strings.Join(s, " or baton "))
			}
		}
		fmt.Fprint(stderr, mainUsage)
		return exitUsage
	case errors.As(err, &fe):
		fmt.Fprintf(stderr, "baton %s: %s\n%s\n", commandName(cmd), fe.msg, usageLine(commandName(cmd), cmd.Long))
		return exitUsage
	case err != nil:
		fmt.Fprintf(stderr, "baton %s: %v\n", commandName(cmd), err)
		return exitUsage
	}
	return c.code
}

// quietLogger discards go-redis's internal log lines.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}
