package baton_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton"
)

// RedisLogger is a go-redis logger (redis.SetLogger takes it) that writes
// each go-redis message to the program's slog logger at WARN.
func TestRedisLoggerWritesGoRedisMessagesToSlog(t *testing.T) {
	var buf bytes.Buffer
	l := baton.RedisLogger(slog.New(slog.NewTextHandler(&buf, nil)))
	_ = func() { redis.SetLogger(l) } // it fits go-redis's logger interface
	l.Printf(context.Background(), "redis: connection pool: failed to dial after %d attempts: %s\n", 5, "refused")
	if out := buf.String(); !strings.Contains(out, `level=WARN msg="redis: connection pool: failed to dial after 5 attempts: refused" component=go-redis`) {
		t.Errorf("go-redis's message not logged through slog:\n%s", out)
	}
}
