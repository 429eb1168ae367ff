// Package wiring holds what the composition root (package baton) and the
// baton command share to reach Redis from a config: the queue Redis client
// and its asynq option, the lock masters, the lock client's options, and
// messages about them that name no secret.
package wiring

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"syscall"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/redact"
	"github.com/batonhq/baton/internal/redisurl"
	"github.com/batonhq/baton/locking"
)

// QueueRedis returns a go-redis client and the asynq connection option for
// the queue Redis of cfg: a URL (rediss:// is TLS), Sentinel or Cluster.
func QueueRedis(cfg *config.Config) (redis.UniversalClient, asynq.RedisConnOpt, error) {
	rc := cfg.Redis
	tlsConfig := func(on bool) *tls.Config {
		if !on {
			return nil
		}
		c, _ := rc.TLS.Load() // validated when the config was loaded
		return c
	}
	switch {
	case rc.Sentinel != nil:
		s := rc.Sentinel
		opts := &redis.FailoverOptions{
			MasterName: s.Master, SentinelAddrs: s.Addrs, Username: s.Username, Password: s.Password,
			DB: s.DB, TLSConfig: tlsConfig(s.TLS), ReadBufferSize: redisurl.BufferSize, WriteBufferSize: redisurl.BufferSize,
			PipelineReadBufferSize: redisurl.BufferSize, PipelineWriteBufferSize: redisurl.BufferSize,
			MaxIdleConns: redisurl.MaxIdleConns,
		}
		return redis.NewFailoverClient(withContextTimeout(opts)), connOpt(func() redis.UniversalClient {
			return redis.NewFailoverClient(copyOf(opts))
		}), nil
	case rc.Cluster != nil:
		cl := rc.Cluster
		opts := &redis.ClusterOptions{
			Addrs: cl.Addrs, Username: cl.Username, Password: cl.Password,
			TLSConfig: tlsConfig(cl.TLS), ReadBufferSize: redisurl.BufferSize, WriteBufferSize: redisurl.BufferSize,
			MaxIdleConns: redisurl.MaxIdleConns,
		} // no pipeline buffers: a Cluster's node clients keep no pipeline pool unless they are set
		return redis.NewClusterClient(withContextTimeout(opts)), connOpt(func() redis.UniversalClient {
			return redis.NewClusterClient(copyOf(opts))
		}), nil
	}
	opts, err := redisurl.Parse(rc.URL)
	if err != nil {
		return nil, nil, fmt.Errorf("redis.url %s: %w", redact.URL(rc.URL), err)
	}
	withTLSFiles(cfg, opts)
	return redis.NewClient(withContextTimeout(opts)), connOpt(func() redis.UniversalClient {
		return redis.NewClient(copyOf(opts))
	}), nil
}

// connOpt is the asynq connection option of the queue Redis: each client
// it makes (asynq's server and client) is go-redis's with the options baton
// read, its connections' buffer sizes among them, which asynq's own option
// types do not carry.
type connOpt func() redis.UniversalClient

// MakeRedisClient returns a new client (asynq.RedisConnOpt).
func (o connOpt) MakeRedisClient() any { return o() }

// copyOf is a copy of opts, for a client of its own.
func copyOf[O any](opts *O) *O {
	c := *opts
	return &c
}

// withContextTimeout is a copy of opts whose client heeds its calls'
// context deadlines (baton's own client; asynq's are made as asynq would).
func withContextTimeout[O redis.Options | redis.FailoverOptions | redis.ClusterOptions](opts *O) *O {
	c := copyOf(opts)
	switch o := any(c).(type) {
	case *redis.Options:
		o.ContextTimeoutEnabled = true
	case *redis.FailoverOptions:
		o.ContextTimeoutEnabled = true
	case *redis.ClusterOptions:
		o.ContextTimeoutEnabled = true
	}
	return c
}

// DialMasters opens a client per URL of locking.masters (none when the list
// is empty: the queue Redis is the lock master then).
func DialMasters(cfg *config.Config) ([]redis.UniversalClient, error) {
	var out []redis.UniversalClient
	for i, raw := range cfg.Locking.Masters {
		opts, err := redisurl.Parse(raw)
		if err != nil {
			CloseAll(out)
			return nil, fmt.Errorf("locking.masters[%d] %s: %w", i, redact.URL(raw), err)
		}
		opts.ContextTimeoutEnabled = true
		withTLSFiles(cfg, opts)
		out = append(out, redis.NewClient(opts))
	}
	return out, nil
}

// withTLSFiles gives a rediss:// client the certificates of redis.tls.
func withTLSFiles(cfg *config.Config, opts *redis.Options) {
	if opts.TLSConfig == nil || cfg.Redis.TLS == nil {
		return
	}
	c, err := cfg.Redis.TLS.Load() // validated when the config was loaded
	if err != nil {
		return
	}
	if c.ServerName == "" {
		c.ServerName = opts.TLSConfig.ServerName // the URL's host
	}
	opts.TLSConfig = c
}

// CloseAll closes every client.
func CloseAll(cs []redis.UniversalClient) {
	for _, c := range cs {
		_ = c.Close()
	}
}

// LockOptions are the lock client's options for cfg, as every replica
// uses them: the namespace's prefix, the margins, the restart handling.
func LockOptions(cfg *config.Config) []locking.Option {
	opts := []locking.Option{
		locking.WithPrefix(LockPrefix(cfg)),
		locking.WithLateness(cfg.Locking.Lateness),
		locking.WithRestartQuarantine(cfg.Locking.RestartQuarantine),
	}
	if cfg.Locking.FreshDeployment {
		opts = append(opts, locking.WithFreshDeployment())
	}
	return opts
}

// DescribeRedis names the queue Redis for logs, without secrets.
func DescribeRedis(cfg *config.Config) string {
	switch {
	case cfg.Redis.Sentinel != nil:
		return fmt.Sprintf("sentinel master %q via %v", cfg.Redis.Sentinel.Master, cfg.Redis.Sentinel.Addrs)
	case cfg.Redis.Cluster != nil:
		return fmt.Sprintf("cluster %v", cfg.Redis.Cluster.Addrs)
	}
	return redact.URL(cfg.Redis.URL)
}

// ErrClass names the kind of a Redis error without the error's text, which
// can hold an address (for /readyz, which anyone who reaches it may read).
func ErrClass(err error) string {
	var ne net.Error
	switch {
	case err == nil:
		return "no error"
	case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
		return "timed out"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, redis.ErrClosed):
		return "client closed"
	case strings.Contains(err.Error(), "NOAUTH") || strings.Contains(err.Error(), "WRONGPASS"):
		return "authentication failed"
	}
	return "error"
}

// Dropping returns l without the messages that drop matches (nil drop: l
// itself), for the lock client's logger (see baton.WithLockMessageFilter).
func Dropping(l *slog.Logger, drop func(msg string) bool) *slog.Logger {
	if drop == nil {
		return l
	}
	return slog.New(dropHandler{l.Handler(), drop})
}

type dropHandler struct {
	slog.Handler
	drop func(string) bool
}

func (h dropHandler) Handle(ctx context.Context, r slog.Record) error {
	if h.drop(r.Message) {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h dropHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return dropHandler{h.Handler.WithAttrs(as), h.drop}
}

func (h dropHandler) WithGroup(name string) slog.Handler {
	return dropHandler{h.Handler.WithGroup(name), h.drop}
}

// WithoutConfigCommand tells whether msg is the lock client's warning that
// it cannot read a master's configuration (maxmemory-policy): a filter
// for baton.WithLockMessageFilter on the embedded server (baton dev,
// batontest), which has no CONFIG command and never evicts.
func WithoutConfigCommand(msg string) bool {
	return strings.Contains(msg, "maxmemory-policy") || strings.Contains(msg, "configuration")
}
