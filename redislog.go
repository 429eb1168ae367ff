package baton

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
)

// RedisLogger adapts l to go-redis's logger, for a program to pass to
// redis.SetLogger: go-redis's own messages (a connection pool that cannot
// dial, a connection that fails to close) then go through the program's
// logger, at WARN, with component=go-redis and secrets as go-redis writes
// them (it names addresses, never passwords).
//
// go-redis keeps one logger per process, not per client, so baton does not
// set it: WithLogger covers baton's own messages only, and a library must
// not change process-wide state unasked. The baton command sets a logger
// that drops go-redis's messages (baton reports an unreachable Redis once,
// itself).
//
//	redis.SetLogger(baton.RedisLogger(logger))
func RedisLogger(l *slog.Logger) interface {
	Printf(ctx context.Context, format string, v ...any)
} {
	return redisLogger{l.With("component", "go-redis")}
}

type redisLogger struct{ l *slog.Logger }

// Printf logs one go-redis message at WARN.
func (r redisLogger) Printf(ctx context.Context, format string, v ...any) {
	r.l.WarnContext(ctx, strings.TrimSpace(fmt.Sprintf(format, v...)))
}
