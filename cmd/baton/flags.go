package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/rs/zerolog"
	"github.com/spf13/pflag"

	"github.com/batonhq/baton/config"
)

// Environment variables that give the common flags their defaults. A flag on
// the command line wins over its variable.
const (
	envConfig    = "BATON_CONFIG"
	envID        = "BATON_ID"
	envHTTP      = "BATON_HTTP"
	envLogFormat = "BATON_LOG_FORMAT"
	envLogLevel  = "BATON_LOG_LEVEL"
)

// Default config files.
const (
	defaultConfigFile    = "baton.yaml"
	defaultDevConfigFile = "config.example.yaml"
)

// commonFlags are the flags of the long-running commands (run, scheduler,
// worker, dev), after parsing.
type commonFlags struct {
	config    string
	id        string
	http      string // empty: cfg.HTTP.Listen
	logFormat string // "", json or console
	logLevel  zerolog.Level
}

// flagSet is the pflag.FlagSet of one command, remembering which flags
// take their default from an environment variable and where each value came
// from.
type flagSet struct {
	*pflag.FlagSet
	name    string
	env     map[string]string // flag name -> environment variable
	fromEnv map[string]bool   // flags whose value came from their variable
}

// newFlagSet returns a silent flag set for "baton NAME" that takes flags
// before and after positional arguments.
func newFlagSet(name string) *flagSet {
	fs := pflag.NewFlagSet("baton "+name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return wrapFlags(name, fs)
}

// wrapFlags wraps fs, the flags of "baton NAME".
func wrapFlags(name string, fs *pflag.FlagSet) *flagSet {
	return &flagSet{FlagSet: fs, name: name, env: map[string]string{}, fromEnv: map[string]bool{}}
}

// stringEnv defines a string flag whose default comes from the environment
// variable env when that is set.
func (f *flagSet) stringEnv(p *string, name, env, def, usage string) {
	f.StringVar(p, name, def, usage+" (env "+env+")")
	f.env[name] = env
}

// configFlag defines the usual --config FILE flag ($BATON_CONFIG, default
// baton.yaml).
func (f *flagSet) configFlag(p *string) {
	f.stringEnv(p, "config", envConfig, defaultConfigFile, "config `FILE`")
}

// isSet reports whether name was given on the command line or by its
// environment variable.
func (f *flagSet) isSet(name string) bool {
	fl := f.Lookup(name)
	return fl != nil && fl.Changed
}

// source names where the value of flag name came from, for messages:
// "--name", "$VAR" or "default --name".
func (f *flagSet) source(name string) string {
	switch {
	case f.fromEnv[name]:
		return "$" + f.env[name]
	case f.isSet(name):
		return "--" + name
	}
	return "default --" + name
}

// applyEnv gives the flags not on the command line the value of their
// environment variable, when it is set. Errors are usage errors.
func (f *flagSet) applyEnv() error {
	for name, env := range f.env {
		if v, ok := os.LookupEnv(env); ok && !f.isSet(name) {
			if err := f.Set(name, v); err != nil {
				return usagef("$%s: %v", env, err)
			}
			f.fromEnv[name] = true
		}
	}
	return nil
}

// addCommon defines the common flags on fs, with def as the config default.
// finish must be called after parsing, with the positional arguments.
func addCommon(fs *flagSet, def string) (cf *commonFlags, finish func(args []string) error) {
	cf = &commonFlags{}
	var level string
	fs.stringEnv(&cf.config, "config", envConfig, def, "config `FILE`")
	fs.stringEnv(&cf.id, "id", envID, "", "replica `ID` (default host-pid)")
	fs.stringEnv(&cf.http, "http", envHTTP, "", "listen `ADDR` for /metrics, /healthz, /readyz (overrides http.listen; \"\" keeps it)")
	fs.stringEnv(&cf.logFormat, "log-format", envLogFormat, "", "log format: json or console (default: console on a terminal, else json)")
	fs.stringEnv(&level, "log-level", envLogLevel, "info", "log level: trace, debug, info, warn, error")
	return cf, func(args []string) error {
		var err error
		if cf.logFormat, err = parseLogFormat(cf.logFormat); err != nil {
			return usagef("%s: %v", fs.source("log-format"), err)
		}
		if cf.logLevel, err = parseLogLevel(level); err != nil {
			return usagef("%s: %v", fs.source("log-level"), err)
		}
		if cf.config == "" {
			return usagef("%s: empty config file name", fs.source("config"))
		}
		if len(args) > 0 {
			return usagef("unexpected argument %q", args[0])
		}
		if cf.id == "" {
			host, _ := os.Hostname()
			if host == "" {
				host = "baton"
			}
			cf.id = fmt.Sprintf("%s-%d", host, os.Getpid())
		}
		if strings.ContainsAny(cf.id, " \t\n") {
			return usagef("%s: replica id %q must not contain white space", fs.source("id"), cf.id)
		}
		return nil
	}
}

// loadConfigFile loads and validates the config file path, named by the flag
// "config" of fs. A file that cannot be read, or is invalid, is a usage error naming
// the file (every problem on its own line).
func loadConfigFile(fs *flagSet, path string) (*config.Config, error) {
	cfg, err := config.LoadFile(path)
	if err == nil {
		return cfg, nil
	}
	var ce *config.Error
	if errors.As(err, &ce) {
		return nil, &configErrors{ce}
	}
	if errors.Is(err, os.ErrNotExist) {
		return nil, usagef("config file %s (%s) does not exist; write one (see config.example.yaml) or name it with --config or $%s", path, fs.source("config"), envConfig)
	}
	return nil, usagef("config file %s (%s): %v", path, fs.source("config"), unprefixed(err))
}

// unprefixed strips the "config: " prefix LoadFile puts on file errors.
func unprefixed(err error) string {
	return strings.TrimPrefix(err.Error(), "config: ")
}

// configErrors is an invalid config file: its message has one line per
// problem, each naming file and line.
type configErrors struct{ ce *config.Error }

func (e *configErrors) Error() string { return e.ce.Error() }
