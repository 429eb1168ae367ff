package quorum

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/redistest"
)

// forgetGroup is a group over three new masters (marker "m"), closed at
// cleanup, and a client of each.
func forgetGroup(t *testing.T) (*Group, []*redis.Client) {
	t.Helper()
	var rdbs []redis.UniversalClient
	var direct []*redis.Client
	for _, s := range redistest.NewN(t, 3) {
		c := s.TestClient(t)
		rdbs, direct = append(rdbs, c), append(direct, c)
	}
	g, err := New(rdbs, Options{Marker: "m", Quarantine: time.Minute, Fresh: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	return g, direct
}

// Forget on a quorum deletes the counters and the other keys it is given
// and raises each master's forgotten floor to one above the largest
// counter it deleted there, never lowering it; a counter that holds no
// fence (corrupt) is deleted without moving the floor.
func TestForgetRaisesTheFloorAboveTheCountersItDeletes(t *testing.T) {
	g, direct := forgetGroup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	floor := func(i int) int64 {
		n, err := direct[i].Get(ctx, "m"+ForgottenSuffix).Int64()
		if err != nil && err != redis.Nil {
			t.Fatal(err)
		}
		return n
	}
	for i, d := range direct {
		d.Set(ctx, "c1", 100+i, 0)
		d.Set(ctx, "c2", "not a fence", 0)
		d.Set(ctx, "mark", "1700000000000", 0)
	}
	if err := g.Forget(ctx, time.Second, []string{"mark"}, []string{"c1", "c2", "missing"}); err != nil {
		t.Fatal(err)
	}
	for i, d := range direct {
		if n := d.Exists(ctx, "c1", "c2", "mark").Val(); n != 0 {
			t.Fatalf("master %d: %d of the forgotten keys left", i, n)
		}
		if f := floor(i); f != int64(101+i) {
			t.Fatalf("master %d: forgotten floor %d, want %d", i, f, 101+i)
		}
	}
	// a smaller counter forgotten later leaves the floor where it is
	direct[0].Set(ctx, "c3", 7, 0)
	if err := g.Forget(ctx, time.Second, nil, []string{"c3"}); err != nil {
		t.Fatal(err)
	}
	if f := floor(0); f != 101 {
		t.Fatalf("forgotten floor %d after a smaller counter, want 101 kept", f)
	}
}

// The floor a forget raises is never lowered by a later one, also when the
// counter it deleted held the largest fence a counter can hold (2^53 - 2,
// see q_int): the floor is then 2^53 - 1, which must still read as a
// floor, not as garbage that a later forget overwrites with a smaller one.
func TestForgetNeverLowersTheFloorAfterTheLargestCounter(t *testing.T) {
	g, direct := forgetGroup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const largest = 9007199254740990 // 2^53 - 2: q_int's largest counter
	for _, d := range direct {
		d.Set(ctx, "big", largest, 0)
		d.Set(ctx, "small", 7, 0)
	}
	if err := g.Forget(ctx, time.Second, nil, []string{"big"}); err != nil {
		t.Fatal(err)
	}
	if err := g.Forget(ctx, time.Second, nil, []string{"small"}); err != nil {
		t.Fatal(err)
	}
	for i, d := range direct {
		if f, err := d.Get(ctx, "m"+ForgottenSuffix).Int64(); err != nil || f <= largest {
			t.Fatalf("master %d: forgotten floor %d (%v) after forgetting a counter at %d, then one at 7: lowered below it", i, f, err, int64(largest))
		}
	}
}
