package scheduler

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// membership is the set of live scheduler replicas, as last read. It only
// spreads the claiming work (one preferred claimer per tick); correctness
// never depends on it.
type membership struct {
	ids  []string
	self int // index of this replica, -1 if not listed yet
}

const heartbeat = 2 * time.Second

// membershipLoop heartbeats this replica into a sorted set on the first lock
// master (score: last heartbeat, ms) and reads the live members.
func (s *Scheduler) membershipLoop(ctx context.Context) {
	defer s.wg.Done()
	rdb := s.masters[0]
	defer func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		rdb.ZRem(ctx, s.membersKey(), s.opts.replica) // a graceful stop leaves at once
	}()
	for {
		s.beat(ctx, rdb)
		t := s.opts.clock.NewTimer(heartbeat)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

func (s *Scheduler) beat(ctx context.Context, rdb redis.UniversalClient) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.timeout)
	defer cancel()
	now := s.opts.clock.Now().UnixMilli()
	pipe := rdb.Pipeline()
	pipe.ZAdd(ctx, s.membersKey(), redis.Z{Score: float64(now), Member: s.opts.replica})
	pipe.ZRemRangeByScore(ctx, s.membersKey(), "-inf", strconv.FormatInt(now-3*heartbeat.Milliseconds(), 10))
	ids := pipe.ZRange(ctx, s.membersKey(), 0, -1)
	if _, err := pipe.Exec(ctx); err != nil {
		s.opts.log.Debug("membership heartbeat failed", "err", err)
		return
	}
	list := ids.Val()
	slices.Sort(list)
	s.members.Store(&membership{ids: list, self: slices.Index(list, s.opts.replica)})
}
