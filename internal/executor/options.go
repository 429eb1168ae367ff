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
