package executor

import (
	"log/slog"
	"net/http"

	"github.com/batonhq/baton/jobs"
)

// DefaultOutputLimit is how much output Execute keeps by default.
const DefaultOutputLimit = 64 << 10

// Option configures an Executor (New).
type Option func(*Executor)

// WithHandlers sets the registry handler jobs are looked up in. Default
// none: every handler job fails with ErrUnknownHandler.
func WithHandlers(r *jobs.Registry) Option { return func(e *Executor) { e.handlers = r } }

// WithSupervisorPath sets the executable exec jobs' supervisors run as: a
// binary whose main calls baton.MaybeRunSupervisor first thing. Default "",
// the running binary (os.Executable()).
func WithSupervisorPath(path string) Option { return func(e *Executor) { e.supervisorPath = path } }

// WithCgroups sets where each exec run gets a cgroup v2 of its own, so
// that every process it started is killed when it ends, also one that left
// its process group, renamed itself and cleared its environment: "" (the
// default) the cgroup this process runs in, a cgroup v2 directory, or
// runcgroup.Off ("off") for none. New checks it can make cgroups there and
// removes those that a baton process that is gone left behind. Where it
// cannot (no cgroup v2 mounted, or not writable: under systemd without
// Delegate=yes), exec runs go without, and New logs one line saying so and
// what then escapes (at WARN for a directory given, at INFO otherwise).
func WithCgroups(dir string) Option { return func(e *Executor) { e.cgroupDir = dir } }

// WithOutputLimit sets how many bytes of output a Result keeps (see
// jobs.Result.Output). Default DefaultOutputLimit (64 KiB); n <= 0 keeps
// none.
func WithOutputLimit(n int) Option { return func(e *Executor) { e.outputLimit = max(n, 0) } }

// WithHTTPClient sets the client of http jobs. Default a client with
// http.DefaultTransport and no timeout of its own (ctx and Job.Timeout bound
// each request).
func WithHTTPClient(c *http.Client) Option { return func(e *Executor) { e.client = c } }

// WithLogger sets the logger. Default: no logging.
func WithLogger(l *slog.Logger) Option {
	return func(e *Executor) {
		if l != nil {
			e.log = l
		}
	}
}
