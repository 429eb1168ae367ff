package redistest

import "go.uber.org/goleak"

// GoleakOptions are the goleak options every baton test package uses. They
// ignore only goroutines that the test harness's dependencies leave behind:
//
//   - go-redis, for a moment after a client is closed: after PoolSize failed
//     dials its pool probes the server in the background, sleeping 1s
//     between probes, and notices the close only after the sleep;
//   - toxiproxy (the in-process fault proxy): a toxic added to a connection
//     that the proxy is tearing down at that instant (a fault schedule that
//     cuts a connection and adds the next fault at once) can leave the
//     toxic's goroutine blocked forever on a channel nobody reads. It holds
//     no connection and belongs to the proxy, never to baton.
func GoleakOptions() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"),
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2/toxics.(*ToxicStub).Run"),
	}
}
