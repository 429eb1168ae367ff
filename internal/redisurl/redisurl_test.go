package redisurl

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/internal/redisurl/syntax"
)

// A URL with "//host" gives the host, port, password and database written.
func TestParseReadsTheServerWritten(t *testing.T) {
	o, err := Parse("rediss://user:s3cret@cache.internal:6380/2?dial_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	if o.Addr != "cache.internal:6380" || o.Username != "user" || o.Password != "s3cret" || o.DB != 2 || o.TLSConfig == nil {
		t.Errorf("options %+v", o)
	}
	if o, err := Parse("redis://[::1]/0"); err != nil || o.Addr != "[::1]:6379" {
		t.Errorf("IPv6 literal: %v, %v", o, err)
	}
}

// URLs go-redis would read as another server (localhost:6379), or not
// read, are refused with a message that says what is wrong and holds no
// part of the URL.
func TestParseRefusesAURLWithoutHost(t *testing.T) {
	for raw, want := range map[string]string{
		"redis//:s3cret@host":         "no scheme",
		"redis:/:s3cret@host":         "no // after the scheme",
		"redis:s3cret@host":           "no // after the scheme",
		"redis:s3cret@host:6380/0":    "no // after the scheme",
		"rediss:s3cret@host":          "no // after the scheme",
		"redis://":                    "no host name",
		"redis:///0":                  "no host name",
		"redis://:s3cret@:6379/0":     "no host name",
		"http://:s3cret@host/0":       "scheme must be redis://",
		"redis://:s3cret@host/0/1":    "the path after host:port must be empty or /N",
		"redis://host/s3cret":         "the path after host:port must be empty or /N",
		"redis://:s3%zzcret@host/0":   `a "%" not followed by two hex digits`,
		"redis://:s3cret@h st:6379/0": "a character a host name cannot hold",
		"redis://:s3cret":             "a port that is not a number",
		"redis://user:s3cret/0":       "a port that is not a number",
	} {
		_, err := Parse(raw)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want an error saying %q", raw, err, want)
			continue
		}
		if strings.Contains(err.Error(), "s3") || strings.Contains(err.Error(), "cret") {
			t.Errorf("Parse(%q): the error %q shows part of the URL", raw, err)
		}
	}
}

// A client's connections get baton's smaller buffers.
func TestParseGivesConnectionsBatonsBuffers(t *testing.T) {
	o, err := Parse("redis://127.0.0.1:6379/0?dial_timeout=2s")
	if err != nil {
		t.Fatal(err)
	}
	if o.ReadBufferSize != BufferSize || o.WriteBufferSize != BufferSize {
		t.Errorf("buffers %d and %d, want %d", o.ReadBufferSize, o.WriteBufferSize, BufferSize)
	}
	if o.PipelineReadBufferSize != BufferSize || o.PipelineWriteBufferSize != BufferSize {
		t.Errorf("pipeline buffers %d and %d (go-redis's default: 128 KiB), want %d", o.PipelineReadBufferSize, o.PipelineWriteBufferSize, BufferSize)
	}
}

// After a burst of commands at once, a client keeps at most MaxIdleConns
// idle connections, not every connection the burst opened; a URL's
// max_idle_conns still says otherwise. The burst's commands end one after
// another: go-redis (v9.23) checks the idle bound without its lock as a
// connection comes back, so connections handed back at the same instant
// may all stay idle (16 of 16 in a run with three busy cores) until they
// reach their idle time.
func TestAPoolShedsTheConnectionsOfABurst(t *testing.T) {
	srv := redistest.New(t)
	for _, tc := range []struct {
		query string
		want  int
	}{{"", MaxIdleConns}, {"?max_idle_conns=3", 3}} {
		o, err := Parse("redis://" + srv.Addr() + "/0" + tc.query)
		if err != nil {
			t.Fatal(err)
		}
		o.ClientName = "burst" + fmt.Sprint(tc.want)
		c := redis.NewClient(o)
		ctx := context.Background()
		// 16 commands at once, each holding its connection until all are
		// blocked: a burst twice MaxIdleConns wide (the pool's size is 10
		// per core)
		key := "burst:" + o.ClientName
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for range 16 {
			wg.Go(func() { errs <- c.BLPop(ctx, 0, key).Err() })
		}
		if err := waitBlocked(ctx, srv, 16); err != nil {
			t.Fatal(err)
		}
		admin := srv.Client()
		for i := range 16 { // one at a time: each command ends, and its connection is back, before the next
			if err := admin.RPush(ctx, key, i).Err(); err != nil {
				t.Fatal(err)
			}
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		admin.Close()
		wg.Wait()
		if st := c.PoolStats(); int(st.TotalConns) > tc.want || int(st.IdleConns) > tc.want {
			t.Errorf("%q: after the burst the pool holds %d connections, %d idle: want at most %d", tc.query, st.TotalConns, st.IdleConns, tc.want)
		}
		n, err := namedClients(ctx, srv, o.ClientName)
		if err != nil {
			t.Fatal(err)
		}
		if n > tc.want {
			t.Errorf("%q: the server lists %d connections of the client, want at most %d", tc.query, n, tc.want)
		}
		c.Close()
	}
}

// A URL's min_idle_conns raises the bound by as much: a pool keeps its
// minimum idle, dialing one whenever a command takes one, so a bound at or
// below it closes each connection handed back and every command dials
// another (on a lock master also a restart check, and every script sent
// whole again). A URL's own max_idle_conns, 0 (no bound) among them, stays.
func TestAURLsMinIdleConnsAreKeptNotDialedAgain(t *testing.T) {
	srv := redistest.New(t)
	o, err := Parse("redis://" + srv.Addr() + "/0?min_idle_conns=10")
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(o)
	defer c.Close()
	admin := srv.Client()
	defer admin.Close()
	ctx := context.Background()
	// the pool opens its minimum in the background (IdleConns counts the
	// dials under way, TotalConns the connections made)
	poll.Require(t, 10*time.Second, "the pool's minimum of idle connections", func() bool { return c.PoolStats().TotalConns >= 10 })
	before, err := connectionsReceived(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	for range 100 {
		if err := c.Ping(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
	after, err := connectionsReceived(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	// one: the first command takes one of the minimum, which is dialed
	// again, and hands it back beside it
	if n := after - before; n > 1 {
		t.Errorf("100 commands one after another over a pool of 10 idle connections dialed %d more, want 1 at most (min_idle_conns 10, max_idle_conns %d)", n, o.MaxIdleConns)
	}
	for query, want := range map[string]int{"?max_idle_conns=0": 0, "?max_idle_conns=12&min_idle_conns=2": 12, "?min_idle_conns=2": 2 + MaxIdleConns} {
		o, err := Parse("redis://127.0.0.1:6379/0" + query)
		if err != nil {
			t.Fatal(err)
		}
		if o.MaxIdleConns != want {
			t.Errorf("%s: max_idle_conns %d, want %d", query, o.MaxIdleConns, want)
		}
	}
}

// connectionsReceived is the server's count of connections accepted.
func connectionsReceived(ctx context.Context, admin *redis.Client) (int, error) {
	info, err := admin.Info(ctx, "stats").Result()
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(l, "total_connections_received:"); ok {
			var n int
			_, err := fmt.Sscan(v, &n)
			return n, err
		}
	}
	return 0, fmt.Errorf("no total_connections_received in INFO stats")
}

// namedClients counts the server's connections named name.
func namedClients(ctx context.Context, srv *redistest.Server, name string) (int, error) {
	admin := srv.Client()
	defer admin.Close()
	list, err := admin.ClientList(ctx).Result()
	if err != nil {
		return 0, err
	}
	return strings.Count(list, " name="+name+" "), nil
}

// waitBlocked waits until n clients are blocked on the server, for at
// most 10 s.
func waitBlocked(ctx context.Context, srv *redistest.Server, n int) error {
	admin := srv.Client()
	defer admin.Close()
	var info string
	for range 1000 {
		var err error
		if info, err = admin.Info(ctx, "clients").Result(); err != nil {
			return err
		}
		if strings.Contains(info, fmt.Sprintf("blocked_clients:%d\r", n)) {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("%d clients never blocked: %s", n, info)
}

// syntax.Check, which config uses without go-redis, accepts what
// redis.ParseURL accepts and reads the same server and database from it;
// it refuses more only where go-redis would dial another server than the
// one written or drop an option unread.
func TestSyntaxCheckAgreesWithGoRedis(t *testing.T) {
	good := map[string]string{"number": "3", "duration": "2s", "boolean": "true", "text": "baton"}
	bad := map[string]string{"number": "x", "duration": "2parsecs", "boolean": "yes"}
	kinds := map[string]string{
		"db": "number", "protocol": "number", "client_name": "text", "max_retries": "number",
		"min_retry_backoff": "duration", "max_retry_backoff": "duration", "dial_timeout": "duration",
		"read_timeout": "duration", "write_timeout": "duration", "pool_fifo": "boolean",
		"pool_size": "number", "pool_timeout": "duration", "min_idle_conns": "number",
		"max_idle_conns": "number", "max_active_conns": "number", "max_concurrent_dials": "number",
		"pipeline_pool_size": "number", "pipeline_read_buffer_size": "number",
		"pipeline_write_buffer_size": "number", "conn_max_idle_time": "duration",
		"idle_timeout": "duration", "conn_max_lifetime": "duration", "max_conn_age": "duration",
		"conn_max_lifetime_jitter": "duration",
	}
	urls := []string{
		"redis://host", "redis://host:7000", "redis://host/2", "redis://[::1]:7000/3", "rediss://u:p@host/1",
		"redis://host/0?dial_timeout=2", "redis://host/0?dial_timeout=-1", "redis://host/0?dial_timeout=0s",
		"redis://host/3?db=5", "redis://host/3?db=", "redis://host/0?pool_size=1&pool_size=2",
		"redis://host/0?pool_size=x&pool_size=2", "redis://host/0?unknown=1", "redis://host/0?skip_verify=true",
		"rediss://host/0?skip_verify=true", "rediss://host/0?skip_verify=maybe", "redis://host/x",
		"redis://host/0?idle_timeout=1&conn_max_idle_time=2", "redis://host/0?max_conn_age=1&conn_max_lifetime=2",
		"redis://host/0?pool_fifo=", "redis://host/0?pool_fifo=0", "redis://host/0?max_retries=-1",
	}
	for name, kind := range kinds {
		urls = append(urls, "redis://host/0?"+name+"="+good[kind], "redis://host/0?"+name+"=")
		if b, ok := bad[kind]; ok {
			urls = append(urls, "redis://host/0?"+name+"="+b)
		}
	}
	for _, raw := range urls {
		target, err := syntax.Check(raw)
		o, goErr := redis.ParseURL(raw)
		switch {
		case (err == nil) != (goErr == nil):
			t.Errorf("%s: syntax.Check says %v, redis.ParseURL says %v", raw, err, goErr)
		case err == nil && (target.Addr != o.Addr || target.DB != o.DB || target.TLS != (o.TLSConfig != nil)):
			t.Errorf("%s: syntax.Check reads %+v, redis.ParseURL %s db %d TLS %v", raw, target, o.Addr, o.DB, o.TLSConfig != nil)
		}
	}
	// where syntax.Check refuses more: go-redis would dial localhost, or
	// would drop the pair after a ";" unread
	for _, raw := range []string{"redis:host:6380/0", "redis:///0", "redis://host/0?pool_size=1;db=2"} {
		if _, err := syntax.Check(raw); err == nil {
			t.Errorf("%s: syntax.Check accepts it", raw)
		}
	}
}

// An empty max_idle_conns reads as none, as go-redis reads every empty
// option ("leave the value blank to use the default") and syntax.Check
// says: the pool keeps baton's bound, not no bound at all.
func TestAnEmptyMaxIdleConnsKeepsBatonsBound(t *testing.T) {
	for _, raw := range []string{"redis://host/0?max_idle_conns=", "redis://host/0?max_idle_conns=3&max_idle_conns="} {
		o, err := Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if o.MaxIdleConns != MaxIdleConns {
			t.Errorf("%s: MaxIdleConns %d, want %d (0 is no bound: every connection of a burst stays)", raw, o.MaxIdleConns, MaxIdleConns)
		}
	}
}
