package worker

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/executor"
	"github.com/batonhq/baton/internal/worktest"
	"github.com/batonhq/baton/jobs"
	"github.com/batonhq/baton/scheduler"
)

// BenchmarkBufferNext measures how soon kept ticks of a buffer_all job
// start after the run before them ends, on one Redis on loopback: each
// round holds one run, keeps two ticks behind it, ends the run and times
// the start of the first kept tick (it waits on the lease and is woken by
// the release) and of the second (it moves up in the buffer, polled every
// min(lock_ttl/3, 500ms), and then takes the lease the first releases).
// Reported: the medians.
//
//	go test -run '^$' -bench BufferNext -benchtime 20x ./internal/worker/
func BenchmarkBufferNext(b *testing.B) {
	e := newEnv(b)
	cfg := e.Config(b, `  - name: job
    schedule: "@every 1s"
    concurrency: buffer_all
    buffer_max: 3
    lock_ttl: 3s
    handler: {name: job}
`)
	cfg.Worker.Concurrency = 8
	type mark struct {
		tick  time.Time
		start time.Time
		end   time.Time
	}
	marks := make(chan mark, 64)
	held := make(chan struct{}, 1) // the held run started: it has the lease
	var mu sync.Mutex
	gates := map[int64]chan struct{}{}
	exec := RunnerFunc(func(ctx context.Context, _ *config.Job, run jobs.Run, _ executor.Validity) (jobs.Result, error) {
		m := mark{tick: run.Tick, start: time.Now()}
		mu.Lock()
		g, ok := gates[run.Tick.Unix()]
		mu.Unlock()
		if ok {
			held <- struct{}{}
			select {
			case <-g:
			case <-ctx.Done(): // the benchmark failed: its cleanup stops the worker
			}
		}
		m.end = time.Now()
		marks <- m
		return jobs.Result{}, nil
	})
	e.worker(b, cfg, exec, WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	at := func(i int) scheduler.Tick {
		return scheduler.Tick{Job: "job", At: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Second), RunID: "r", Replica: "bench"}
	}
	var first, second []time.Duration
	b.ResetTimer()
	for i := range b.N {
		run, k1, k2 := at(3*i), at(3*i+1), at(3*i+2)
		gate := make(chan struct{})
		mu.Lock()
		gates[run.At.Unix()] = gate
		mu.Unlock()
		e.dispatch(b, cfg, run)
		// not just its task active: it may still be queueing behind the
		// previous round's last run, and a tick dispatched meanwhile could
		// take the lease before it has joined the buffer
		worktest.Recv(b, held, "the held run's start")
		e.dispatch(b, cfg, k1)
		e.dispatch(b, cfg, k2)
		e.requireKept(b, "job", k1, k2)
		close(gate)
		m0 := worktest.Recv(b, marks, "the held run")
		m1 := worktest.Recv(b, marks, "the first kept tick")
		m2 := worktest.Recv(b, marks, "the second kept tick")
		if !m1.tick.Equal(k1.At) || !m2.tick.Equal(k2.At) {
			b.Fatalf("order: %s then %s", m1.tick, m2.tick)
		}
		first = append(first, m1.start.Sub(m0.end))
		second = append(second, m2.start.Sub(m1.end))
	}
	b.StopTimer()
	med := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Microseconds()) / 1000
	}
	b.ReportMetric(med(first), "ms-first-kept")
	b.ReportMetric(med(second), "ms-second-kept")
}
