package jobs

import (
	"time"

	"github.com/batonhq/baton/internal/clock"
)

// every calls f every d on c until done is closed.
func every(done <-chan struct{}, c clock.Clock, d time.Duration, f func()) {
	t := c.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C():
			f()
			t.Reset(d)
		}
	}
}
