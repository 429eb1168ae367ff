package wiring

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/redisurl"
)

// The queue Redis's clients, baton's and those asynq makes from its
// connection option, keep the options baton read: the URL's, and
// connections with redisurl.BufferSize buffers (asynq's own option types
// would leave go-redis's 32 KiB). Only baton's heeds its
// calls' context deadlines, as asynq's own clients do not.
func TestQueueRedisClientsShareBatonsOptions(t *testing.T) {
	cfg, err := config.Load([]byte("redis: {url: \"redis://127.0.0.1:1/3?read_timeout=7s\"}\njobs: []\n"))
	if err != nil {
		t.Fatal(err)
	}
	own, opt, err := QueueRedis(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	made, ok := opt.MakeRedisClient().(*redis.Client)
	if !ok {
		t.Fatalf("asynq's client is %T", opt.MakeRedisClient())
	}
	defer made.Close()
	for name, c := range map[string]*redis.Client{"baton's": own.(*redis.Client), "asynq's": made} {
		o := c.Options()
		if o.ReadBufferSize != redisurl.BufferSize || o.WriteBufferSize != redisurl.BufferSize || o.DB != 3 || o.ReadTimeout.Seconds() != 7 {
			t.Errorf("%s client: buffers %d/%d, db %d, read timeout %v", name, o.ReadBufferSize, o.WriteBufferSize, o.DB, o.ReadTimeout)
		}
		if o.PipelineReadBufferSize != redisurl.BufferSize || o.PipelineWriteBufferSize != redisurl.BufferSize {
			t.Errorf("%s client: pipeline buffers %d/%d", name, o.PipelineReadBufferSize, o.PipelineWriteBufferSize)
		}
	}
	if !own.(*redis.Client).Options().ContextTimeoutEnabled || made.Options().ContextTimeoutEnabled {
		t.Error("only baton's own client heeds context deadlines")
	}
}
