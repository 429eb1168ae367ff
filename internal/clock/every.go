package clock

import (
	"time"
)

// Every calls f every d on c until done is closed.
func Every(done <-chan struct{}, c Clock, d time.Duration, f func()) {
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
