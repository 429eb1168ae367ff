package singleton

import (
	"log/slog"

	"github.com/batonhq/baton/internal/clock"
	"github.com/batonhq/baton/scheduler"
)

// Option configures the singleton runner (New).
type Option func(*options)

type options struct {
	log     *slog.Logger
	replica string
	clock   clock.Clock
}

// WithLogger sets the logger of the runner and its runs. Default: no
// logging.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.log = l
		}
	}
}

// WithReplica sets the replica id runs and campaigns carry (the leader id,
// jobs.Run.Replica, BATON_REPLICA, log lines). Default runid.Replica().
func WithReplica(id string) Option { return func(o *options) { o.replica = id } }

// WithClock sets the clock restart backoffs wait on (scheduler.RealClock by
// default; tests move a simulated one).
func WithClock(c scheduler.Clock) Option {
	return func(o *options) {
		if c != nil {
			o.clock = c
		}
	}
}
