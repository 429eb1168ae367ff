package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/locking"
)

// lockTTL is the lock ttl every library gets: redsync's default expiry, so
// that redsync runs with no option changed.
const lockTTL = 8 * time.Second

// poolSize is the go-redis PoolSize of every client, the same for every library.
const poolSize = 64

// runner is one lock library configured for one cell. lock takes the named
// lock (one attempt or waiting, as the library is configured; ctx bounds the
// wait) and returns the function that releases it.
type runner interface {
	lock(ctx context.Context, key string) (unlock func(context.Context) error, err error)
}

// errBusy is the floor runner's answer when the key is taken.
var errBusy = errors.New("floor: key is taken")

// cmdCounter is a go-redis hook counting the commands a library sends,
// pipelined ones included. Connection handshakes (HELLO, CLIENT SETINFO, AUTH,
// SELECT) are left out. Pub/sub traffic never passes through hooks: a
// SUBSCRIBE and the messages it receives are not counted.
type cmdCounter struct{ n atomic.Int64 }

func (c *cmdCounter) count(cmd redis.Cmder) {
	switch cmd.Name() {
	case "hello", "client", "auth", "select":
		return
	}
	c.n.Add(1)
}

func (c *cmdCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *cmdCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.count(cmd)
		return next(ctx, cmd)
	}
}

func (c *cmdCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			c.count(cmd)
		}
		return next(ctx, cmds)
	}
}

// backend is one library's go-redis clients, one per Redis server, all with
// the same options and one shared command counter.
type backend struct {
	clients []*redis.Client
	cmds    *cmdCounter
}

func newBackend(addrs []string) *backend {
	b := &backend{cmds: &cmdCounter{}}
	for _, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a, PoolSize: poolSize})
		c.AddHook(b.cmds)
		b.clients = append(b.clients, c)
	}
	return b
}

// universal returns the first n clients.
func (b *backend) universal(n int) []redis.UniversalClient {
	out := make([]redis.UniversalClient, n)
	for i := range n {
		out[i] = b.clients[i]
	}
	return out
}

func (b *backend) close() {
	for _, c := range b.clients {
		_ = c.Close()
	}
}

func randomToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// floorRunner is the least any safe single-master lock must do: SET key token
// NX PX, then a compare-and-delete script by hash. Two round trips a pair.
type floorRunner struct{ rdb *redis.Client }

var floorRelease = redis.NewScript(`if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) end return 0`)

func (f floorRunner) lock(ctx context.Context, key string) (func(context.Context) error, error) {
	token := randomToken()
	ok, err := f.rdb.SetArgs(ctx, key, token, redis.SetArgs{Mode: "NX", TTL: lockTTL}).Result()
	if errors.Is(err, redis.Nil) || (err == nil && ok != "OK") {
		return nil, errBusy
	}
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		n, err := floorRelease.Run(ctx, f.rdb, []string{key}, token).Int64()
		if err == nil && n != 1 {
			err = errors.New("floor: key was not held")
		}
		return err
	}, nil
}

// batonRunner takes baton leases: TryLock (one attempt) or Lock (waiting,
// woken by pub/sub), with the given lock options.
type batonRunner struct {
	c    *locking.Client
	wait bool
	opts []locking.LockOption
}

func (b batonRunner) lock(ctx context.Context, key string) (func(context.Context) error, error) {
	var l *locking.Lease
	var err error
	if b.wait {
		l, err = b.c.Lock(ctx, key, lockTTL, b.opts...)
	} else {
		l, err = b.c.TryLock(ctx, key, lockTTL, b.opts...)
	}
	if err != nil {
		return nil, err
	}
	return l.Release, nil
}

// redsyncRunner takes a fresh redsync Mutex per acquisition (a Mutex carries
// its holder's value, so it cannot be shared by goroutines).
type redsyncRunner struct {
	rs   *redsync.Redsync
	opts []redsync.Option
}

func newRedsync(clients []redis.UniversalClient, opts ...redsync.Option) redsyncRunner {
	var pools []redsyncredis.Pool
	for _, c := range clients {
		pools = append(pools, goredis.NewPool(c))
	}
	return redsyncRunner{rs: redsync.New(pools...), opts: opts}
}

func (r redsyncRunner) lock(ctx context.Context, key string) (func(context.Context) error, error) {
	m := r.rs.NewMutex(key, r.opts...)
	if err := m.LockContext(ctx); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		ok, err := m.UnlockContext(ctx)
		if err == nil && !ok {
			err = fmt.Errorf("redsync: unlock of %q not confirmed by a quorum", key)
		}
		return err
	}, nil
}

// redislockRunner takes bsm/redislock locks with the given options (nil: its
// default, a single attempt).
type redislockRunner struct {
	c   *redislock.Client
	opt *redislock.Options
}

func (r redislockRunner) lock(ctx context.Context, key string) (func(context.Context) error, error) {
	l, err := r.c.Obtain(ctx, key, lockTTL, r.opt)
	if err != nil {
		return nil, err
	}
	return l.Release, nil
}
