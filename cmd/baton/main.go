// Command baton is the command-line front end of the baton job scheduler.
//
// Subcommands:
//
//	baton lock [flags] KEY -- CMD [ARGS]   run CMD while holding a distributed lock
//	baton version                          print the version
//	baton help [COMMAND]                   print help
//
// The binary is deliberately thin: it parses flags, wires signals and calls
// the library packages (see package github.com/batonhq/baton/locking).
package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/redis/go-redis/v9"
)

// mainUsage is the top-level help text.
const mainUsage = `usage: baton <command> [arguments]

commands:
  lock      run a command while holding a distributed lock (a flock(1) for crontabs)
  version   print the version
  help      print help; "baton help lock" for the lock command
`

func main() {
	// go-redis logs dial failures on its own; baton reports them once, itself.
	redis.SetLogger(quietLogger{})
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the baton command line args (without the program name),
// writing to stdout and stderr, and returns the process exit status. It is
// main without os.Exit, so tests can call it in-process.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, mainUsage)
		return ExitUsage
	}
	switch args[0] {
	case "lock":
		return runLock(args[1:], stdout, stderr)
	case "version", "-version", "--version":
		return runVersion(args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		return runHelp(args[1:], stdout, stderr)
	default:
		fmt.Fprintf(stderr, "baton: unknown command %q\n", args[0])
		fmt.Fprint(stderr, mainUsage)
		return ExitUsage
	}
}

// runHelp prints the help of the named command, or the top-level help.
func runHelp(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stdout, mainUsage)
		return 0
	}
	switch args[0] {
	case "lock":
		return runLock([]string{"-h"}, stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, "usage: baton version\n\nPrints the baton version and the Go version it was built with.")
		return 0
	case "help":
		fmt.Fprint(stdout, mainUsage)
		return 0
	default:
		fmt.Fprintf(stderr, "baton help: unknown command %q\n", args[0])
		fmt.Fprint(stderr, mainUsage)
		return ExitUsage
	}
}

// quietLogger discards go-redis's internal log lines.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}
