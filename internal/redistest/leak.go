package redistest

import "go.uber.org/goleak"

// GoleakOptions are the goleak options every baton test package uses. They
// ignore only goroutines that go-redis itself leaves behind for a moment after
// a client is closed: after PoolSize failed dials its pool probes the server
// in the background, sleeping 1s between probes, and notices the close only
// after the sleep.
func GoleakOptions() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"),
	}
}
