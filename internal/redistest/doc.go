// Package redistest runs real redis-server processes and a real TCP
// fault-injection proxy for tests and benchmarks. Nothing here is a mock.
//
// [Start] launches one redis-server (found by [Binary]) on a free loopback
// port with its data in a private temp dir and persistence turned off. The
// returned [Server] can be stopped, killed, paused (SIGSTOP), resumed and
// restarted on the same address with empty data, so code can be checked
// against crashes, hangs and restarts. [New] and [NewN] wrap Start for tests
// and register cleanup with testing.TB.
//
// [NewProxy] puts an in-process toxiproxy between a client and a server. It
// can add latency, blackhole traffic (connections stay open but nothing gets
// through), cut every connection and refuse new ones, and restore normal
// service on the same address.
//
// Child processes get SIGKILL as their parent-death signal on Linux, so a
// crashed test binary does not leave redis-server processes behind. The
// package needs a Unix-like OS.
//
// A typical test:
//
//	func TestSomething(t *testing.T) {
//		srv := redistest.New(t)
//		rdb := srv.TestClient(t)
//		px := redistest.NewTestProxy(t, srv.Addr())
//		slow := srv.TestClient(t, func(o *redis.Options) { o.Addr = px.Addr() })
//		_ = px.AddLatency(50*time.Millisecond, false)
//		// ...
//	}
package redistest
