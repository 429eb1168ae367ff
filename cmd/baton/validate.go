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

// validateOpts are the flags of "baton validate".
type validateOpts struct {
	path  string
	print bool
}

// defineValidate defines the flags of "baton validate".
func defineValidate(fs *flagSet) *validateOpts {
	o := &validateOpts{}
	fs.configFlag(&o.path)
	fs.BoolVar(&o.print, "print", false, "print the effective config (secrets masked)")
	return o
}

// runValidate implements "baton validate".
func runValidate(_ *flagSet, o *validateOpts, args []string, stdout, stderr io.Writer) int {
	path := o.path
	switch len(args) {
	case 0:
	case 1:
		path = args[0]
	default:
		return usageExit("validate", usagef("unexpected argument %q", args[1]), stderr)
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
	if o.print {
		fmt.Fprint(stdout, cfg.Redacted())
	}
	fmt.Fprintf(stdout, "ok: %d jobs\n", len(cfg.Jobs))
	return 0
}
