package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/batonhq/baton"
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
		var ce *config.Error
		if errors.As(err, &ce) {
			fmt.Fprintln(stderr, ce.Error())
		} else {
			fmt.Fprintf(stderr, "baton validate: %s\n", unprefixed(err))
		}
		return 1
	}
	if o.print {
		fmt.Fprint(stdout, cfg.Redacted())
	}
	fmt.Fprintf(stdout, "ok: %d jobs\n", len(cfg.Jobs))
	fmt.Fprint(stdout, goHandlerNote(cfg))
	return 0
}

// goHandlerNote says, one line per job, which jobs run a Go handler: this
// binary registers none, so only a Go program that registers them can run
// the list. "" without such jobs.
func goHandlerNote(cfg *config.Config) string {
	var b strings.Builder
	for i := range cfg.Jobs {
		if j := &cfg.Jobs[i]; j.Handler != nil {
			fmt.Fprintf(&b, "job %q (line %d) runs Go handler %q: only a Go program that registers it can run this list\n", j.Name, j.Line, j.Handler.Name)
		}
	}
	return b.String()
}

// missingHandlers is the config error of the handler jobs a replica of
// role would run: the binary registers no Go handler. Nil without any.
func missingHandlers(cfg *config.Config, role baton.Role) error {
	var ce *config.Error
	if errors.As(baton.MissingHandlers(cfg, role, nil), &ce) {
		return &configErrors{ce}
	}
	return nil
}
