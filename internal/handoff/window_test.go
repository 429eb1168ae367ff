package handoff

import (
	"testing"
	"time"
)

func TestRetryDelay(t *testing.T) {
	for _, tc := range []struct {
		backoff time.Duration
		n       int
		want    time.Duration
	}{
		{10 * time.Millisecond, 0, 10 * time.Millisecond},
		{10 * time.Millisecond, 1, 20 * time.Millisecond},
		{10 * time.Second, 3, 80 * time.Second},
		{10 * time.Second, 100, maxRetryDelay},
		{2 * time.Hour, 5, 2 * time.Hour},
		{0, 3, 0},
	} {
		if got := BackoffDelay(tc.backoff, tc.n); got != tc.want {
			t.Errorf("backoffDelay(%s, %d) = %s, want %s", tc.backoff, tc.n, got, tc.want)
		}
	}
}
