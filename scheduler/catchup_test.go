package scheduler

import "testing"

// A catch-up claims the newest of the ticks a job missed within its
// starting deadline, as many as its policy says: none (skip), one (latest),
// up to CatchupMax (all); after a start and after an outage alike.
func TestCatchupClaimsTheNewestTicksThePolicyAllows(t *testing.T) {
	cases := []struct {
		policy Catchup
		max    int
		missed int
		want   int
	}{
		{CatchupSkip, 10, 0, 0},
		{CatchupSkip, 10, 5, 0},
		{CatchupLatest, 10, 0, 0},
		{CatchupLatest, 10, 1, 1},
		{CatchupLatest, 10, 5, 1},
		{CatchupAll, 3, 0, 0},
		{CatchupAll, 3, 2, 2},
		{CatchupAll, 3, 5, 3},
	}
	for _, c := range cases {
		j := &Job{Name: "j", Catchup: c.policy, CatchupMax: c.max}
		if got := j.catchupKeeps(c.missed); got != c.want {
			t.Errorf("%s (max %d) of %d missed ticks: claims %d, want %d", c.policy, c.max, c.missed, got, c.want)
		}
	}
}
