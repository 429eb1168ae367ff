// Package redisurl reads the redis:// and rediss:// URLs of a config or a
// command-line flag into go-redis options, after internal/redisurl/syntax
// checked them: a URL go-redis would read as another server than the one
// written is refused there, without go-redis. Its errors say what is wrong
// and hold no part of the URL, which may hold a password: callers name the
// URL, masked with redact.URL.
package redisurl

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/redisurl/syntax"
)

// Parse returns the go-redis options of a redis:// or rediss:// URL that
// syntax.Check accepts (and redis.ParseURL too). Its connections have
// buffers of BufferSize, its pipelines' too, and each of its pools keeps at
// most MaxIdleConns idle connections beyond its min_idle_conns, unless the
// URL says otherwise (max_idle_conns; 0: no bound).
func Parse(raw string) (*redis.Options, error) {
	if _, err := syntax.Check(raw); err != nil {
		return nil, err
	}
	o, err := redis.ParseURL(raw)
	if err != nil {
		// syntax.Check refuses what redis.ParseURL does (a test holds them
		// together); the text is go-redis's, without the URL
		return nil, fmt.Errorf("invalid URL: %s", strings.TrimPrefix(err.Error(), "redis: "))
	}
	o.ReadBufferSize, o.WriteBufferSize = BufferSize, BufferSize
	o.PipelineReadBufferSize, o.PipelineWriteBufferSize = BufferSize, BufferSize
	if u, _ := url.Parse(raw); last(u.Query()["max_idle_conns"]) == "" {
		// the bound is on top of the URL's min_idle_conns: a pool keeps
		// that many idle, dialing one whenever a command takes one, so with
		// no room above it each connection handed back would be closed and
		// every command would dial another
		o.MaxIdleConns = o.MinIdleConns + MaxIdleConns
	}
	return o, nil
}

// last is the value go-redis reads of a repeated option: the last one; ""
// (none, or empty: go-redis's default) for none.
func last(vs []string) string {
	if len(vs) == 0 {
		return ""
	}
	return vs[len(vs)-1]
}

// BufferSize is the size of the read and of the write buffer of each
// connection of baton's Redis clients (go-redis: 32 KiB each). A pool keeps
// the most connections its busiest moment opened (up to its size: go-redis
// hands out the newest first, so under a lighter load the others stay, idle
// but never idle long enough to close), and a replica holds a hundred or
// more: 64 KiB apiece was most of the growth of its heap over a long run.
// baton's commands and replies are small; a longer reply is read in more
// reads. Pipelines get them too: go-redis keeps a pool of its own for
// pipelines (up to 10 connections a client beside the main pool's), whose
// connections would otherwise have 128 KiB read and write buffers each,
// and a replica pipelines all along (quorum batches, claims, run
// records): those buffers were a quarter of its live heap. The pipeline
// pool stays: without it, pipelines wait for the main pool's connections,
// and under a starved CPU a run's end record waited past its timeout.
const BufferSize = 8 << 10

// MaxIdleConns is the most idle connections each pool of a baton client
// keeps beyond a URL's min_idle_conns (its main pool and its pipelines'
// alike; go-redis: no bound). A
// pool opens a connection for each command in flight at once, up to its
// size (10 per core, and 10 for pipelines), and hands out the newest idle
// one first, so without a bound it keeps what its busiest moment opened,
// idle but never idle long enough to close: a replica's bursts (every
// job of one period due in the same second, each taking its lock on
// every master) raised its connections to each lock master from some 18
// to 24 over a long run, and each master's client buffers with them.
// With the bound a pool returns to it after a burst, and a burst wider
// than the bound dials what it needs again (a connection and a HELLO on
// loopback or a LAN: cheap beside the tick's own commands).
const MaxIdleConns = 8

// describe says what is wrong in an error of url.Parse or redis.ParseURL
// without the URL: a *url.Error quotes all of it, a bad escape the three
// bytes it is in (of a password, maybe), a bad port the port (the password
// of "redis://:pw", maybe).
