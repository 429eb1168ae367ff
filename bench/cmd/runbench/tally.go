package main

import "time"

// tickObs is what was seen of one (schedule, due instant).
type tickObs struct {
	dispatched    int       // jobs/tasks created for it, duplicates included
	runs          int       // starts by a worker
	firstDispatch time.Time // zero without a dispatch
	firstStart    time.Time // zero without a start
}

// tally sums the N schedules' ticks due at at.
func tally(at time.Time, label string, n int, obs map[tickKey]*tickObs) instantResult {
	r := instantResult{at: at, label: label, due: n}
	for i := range n {
		o := obs[tickKey{schedID(i), at.Unix()}]
		if o == nil {
			r.missed++
			continue
		}
		r.dispatched += o.dispatched
		if !o.firstDispatch.IsZero() {
			r.dispatchLag = append(r.dispatchLag, o.firstDispatch.Sub(at))
		}
		copies := max(o.runs, o.dispatched)
		if copies > 1 {
			r.duplicates++
			r.extra += copies - 1
		}
		if o.runs == 0 {
			r.missed++
			continue
		}
		r.started++
		r.lag = append(r.lag, o.firstStart.Sub(at))
	}
	return r
}
