package main

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/batonhq/baton/bench/internal/machine"
)

// quantiles returns p50, p99 (nearest rank) and max of ds.
func quantiles(ds []time.Duration) (p50, p99, mx time.Duration) {
	if len(ds) == 0 {
		return
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := func(q float64) time.Duration {
		i := int(q*float64(len(s))+0.999999) - 1
		return s[min(max(i, 0), len(s)-1)]
	}
	return rank(0.50), rank(0.99), s[len(s)-1]
}

func pick(ss []sample, f func(sample) time.Duration) []time.Duration {
	out := make([]time.Duration, len(ss))
	for i, s := range ss {
		out[i] = f(s)
	}
	return out
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }

func makeReport(results []*ttlResult, cfg config, began time.Time) string {
	var b strings.Builder
	b.WriteString("# Singleton failover and handoff\n\n")
	b.WriteString("3 `baton run` replicas (the real binary) on one redis-server share a `mode: singleton` exec job " +
		"that appends `pid fence unix-ns replica` to a file every 20 ms. Times come from the heartbeat lines " +
		"(`date +%s%N` in the child) and the replicas' JSON logs; all processes are on one host, one clock.\n\n")
	fmt.Fprintf(&b, "- **failover**: SIGKILL the holder's baton process; from the kill to the first heartbeat of the next term "+
		"(fence above the old one). The killed replica is restarted after each take-over; each kill comes 0.5 s + "+
		"a random delay, uniform in [0, TTL), after that restart, so it falls at a random point of the lease's renewal cycle.\n")
	b.WriteString("- **handoff**: SIGTERM the holder; from its `resigned` log line (the child already stopped, the lease " +
		"released) to the first heartbeat of the next term; \"from SIGTERM\" adds the time to stop the child and resign.\n\n")

	b.WriteString("| lock_ttl | case | n | p50 | p99 | max | target (p99) | met |\n|---|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		row := func(name string, ds []time.Duration, target time.Duration) {
			p50, p99, mx := quantiles(ds)
			met := "yes"
			if target > 0 && p99 > target {
				met = "**no**"
			}
			t := "-"
			if target > 0 {
				t = "≤ " + ms(target)
			} else {
				met = "-"
			}
			fmt.Fprintf(&b, "| %v | %s | %d | %s | %s | %s | %s | %s |\n", r.ttl, name, len(ds), ms(p50), ms(p99), ms(mx), t, met)
		}
		row("failover: SIGKILL → new holder's first heartbeat", pick(r.failover, func(s sample) time.Duration { return s.total }), r.ttl+250*time.Millisecond)
		row("↳ SIGKILL → new holder elected (log)", pick(r.failover, func(s sample) time.Duration { return s.elected }), 0)
		row("↳ elected → first heartbeat (process start)", pick(r.failover, func(s sample) time.Duration { return s.toBeat }), 0)
		row("↳ old holder's last heartbeat → SIGKILL", pick(r.failover, func(s sample) time.Duration { return s.lastBeat }), 0)
		row("handoff: resigned → new holder's first heartbeat", pick(r.handoff, func(s sample) time.Duration { return s.total }), 50*time.Millisecond)
		row("↳ resigned → new holder elected (log)", pick(r.handoff, func(s sample) time.Duration { return s.elected }), 0)
		row("↳ handoff from SIGTERM", pick(r.handoff, func(s sample) time.Duration { return s.fromSig }), 0)
		if r.noResign > 0 {
			fmt.Fprintf(&b, "\n%v: %d handoffs had no `resigned` line; they are timed from the SIGTERM.\n", r.ttl, r.noResign)
		}
	}

	b.WriteString("\n## The floor\n\n")
	b.WriteString("A SIGKILLed holder cannot release its lease, so no one may take over before the lease expires: " +
		"failover ≥ **remaining TTL** at the kill (the lease is extended every TTL/3, so between 2/3·TTL " +
		"and TTL, depending on when it was last extended) + **wake-up** (standbys re-check at the expiry " +
		"they read) + **acquire** (one lock round trip) + **process start** (supervisor, `sh`, first " +
		"`echo`; the \"elected → first heartbeat\" row). The old holder's supervisor kills its child before the lease deadline on " +
		"its own, so the heartbeats never overlap. Target: p99 ≤ TTL + 250 ms.\n\n")
	b.WriteString("A graceful handoff has no TTL in it: the holder stops its child, releases the lease and " +
		"standbys are woken at once, so only wake-up + acquire + process start remain. Target: p99 ≤ 50 ms " +
		"from the `resigned` line.\n\n")

	b.WriteString("## Machine\n\n")
	for _, l := range machine.Describe(began, "persistence off, loopback, one process started by the benchmark",
		[]string{"github.com/redis/go-redis/v9"}, "cd bench && go run ./cmd/failbench", cfg.args) {
		b.WriteString("- " + l + "\n")
	}
	return b.String()
}
