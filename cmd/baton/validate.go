package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/batonhq/baton/config"
)

const validateHelp = `usage: baton validate [--config FILE] [--print] [FILE]

Loads and checks a config file (FILE, else --config, else $BATON_CONFIG,
else baton.yaml) without contacting Redis. Prints "ok: N jobs", or every
problem as FILE:LINE: message. With --print it also prints the effective
config, defaults filled in and secrets masked.

Exit status: 0 valid; 1 invalid or unreadable; 2 usage error.

flags:
`

// runValidate implements "baton validate".
func runValidate(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("validate")
	var path string
	fs.stringEnv(&path, "config", envConfig, defaultConfigFile, "config `FILE`")
	print := fs.Bool("print", false, "print the effective config (secrets masked)")
	if err := fs.parse(args, validateHelp, stdout); err != nil {
		return exitParse("validate", err, stderr)
	}
	switch fs.NArg() {
	case 0:
	case 1:
		path = fs.Arg(0)
	default:
		return usageExit("validate", usagef("unexpected argument %q", fs.Arg(1)), stderr)
	}
	cfg, err := config.LoadFile(path)
	if err != nil {
		var ce *config.ConfigError
		if errors.As(err, &ce) {
			fmt.Fprintln(stderr, ce.Error())
		} else {
			fmt.Fprintf(stderr, "baton validate: %s\n", unwrapJobs(err))
		}
		return 1
	}
	if *print {
		fmt.Fprint(stdout, cfg.Redacted())
	}
	fmt.Fprintf(stdout, "ok: %d jobs\n", len(cfg.Jobs))
	return 0
}
