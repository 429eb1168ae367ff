// Package lifecycle starts and stops the long-running parts of a replica
// one way. Each part (the runtime schedules' follower, the worker, the
// singleton jobs, the leadership campaign, the scheduler; inside the
// worker its Redis client, roster heartbeat, replace subscription and
// runs; in the binary the HTTP listener, each replica and the HTTP
// serving) is a Service; a Group starts a list of them in order and stops
// them in reverse, so a part is started after what it relies on and
// stopped before it. A Group is itself a Service, so a few parts that
// stop together (the scheduler and the leadership it claims under) are a
// Group inside the replica's.
//
// Start's context bounds the start only: a part runs until it is stopped,
// not until that context ends, so that it is stopped in its turn.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Service is a long-running part.
type Service interface {
	// Start starts the part and returns once it runs, its loops in the
	// background; an error means none of it runs. ctx bounds the start
	// (and carries its values), not the run.
	Start(ctx context.Context) error
	// Stop stops the part and returns once it stopped. When ctx ends
	// first, the part stops at once what it still can and returns an
	// error wrapping ctx's (a part that ignores its context is not waited
	// for forever). Stop is safe on a part never started, and twice: the
	// second does nothing.
	Stop(ctx context.Context) error
}

// Part is a Service with the name its errors and logs go by.
type Part struct {
	Name string
	Service
}

// MinStop is the time a part gets to stop when its turn comes after the
// group's stop context ended.
const MinStop = 5 * time.Second

// Group is a list of parts started in order and stopped in reverse.
type Group struct {
	parts []Part

	mu      sync.Mutex
	started int  // parts started, a prefix of parts
	stopped bool // Stop ran
}

// NewGroup returns the group of parts, in their starting order.
func NewGroup(parts ...Part) *Group { return &Group{parts: parts} }

// Start starts the parts one after the other. When one fails, the parts
// started before it are stopped, in reverse (bounded by ctx, or a
// minute when ctx has ended), and the error names the part that failed. A
// group starts once; a stopped one does not start again.
func (g *Group) Start(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.started > 0 || g.stopped {
		return errors.New("lifecycle: group already started")
	}
	for _, p := range g.parts {
		if err := p.Start(ctx); err != nil {
			sctx, cancel := stopContext(ctx)
			defer cancel()
			return errors.Join(fmt.Errorf("start %s: %w", p.Name, err), g.stopLocked(sctx))
		}
		g.started++
	}
	return nil
}

// Stop stops the started parts in reverse order, each in its turn even
// when one before it failed, and returns their errors joined, each named
// by its part. A part whose turn comes once ctx has ended (a worker used
// up the shutdown's time) still gets MinStop to stop, so that the parts
// it relied on are not closed under it.
func (g *Group) Stop(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.stopLocked(ctx)
}

func (g *Group) stopLocked(ctx context.Context) error {
	g.stopped = true
	var errs []error
	for ; g.started > 0; g.started-- {
		p := g.parts[g.started-1]
		pctx, cancel := ctx, context.CancelFunc(func() {})
		if ctx.Err() != nil {
			pctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), MinStop)
		}
		if err := p.Stop(pctx); err != nil {
			errs = append(errs, fmt.Errorf("stop %s: %w", p.Name, err))
		}
		cancel()
	}
	return errors.Join(errs...)
}

// stopContext is the context the parts started before a failed start are
// stopped with: ctx while it lasts, else a minute of its own.
func stopContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if ctx.Err() == nil {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
}

// Loop is a Service made of a function that runs until its context ends
// (a follower's or a scheduler's Run): Start runs it in a goroutine, Stop
// ends its context and waits for it to return.
type Loop struct {
	run func(ctx context.Context) error

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{} // closed when run returned; nil before Start
	err    error         // what run returned, once done is closed
}

// NewLoop returns the Loop of run. run is called once, with a context
// that keeps Start's values and ends at Stop.
func NewLoop(run func(ctx context.Context) error) *Loop {
	return &Loop{run: run}
}

// Start runs the loop in a goroutine. Starting it twice is an error.
func (l *Loop) Start(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done != nil {
		return errors.New("lifecycle: loop already started")
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	l.cancel, l.done = cancel, make(chan struct{})
	go func() {
		defer close(l.done)
		l.err = l.run(rctx)
	}()
	return nil
}

// Done is closed once the loop's function returned, by itself or at
// Stop; nil before Start.
func (l *Loop) Done() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.done
}

// Err is what the loop's function returned, once Done is closed.
func (l *Loop) Err() error {
	<-l.Done()
	return l.err
}

// Stop ends the loop's context and waits for its function to return;
// when ctx ends first it returns ctx's error without waiting further (a
// function that ignores its context is not waited for forever). It
// returns nil on a loop never started.
func (l *Loop) Stop(ctx context.Context) error {
	l.mu.Lock()
	cancel, done := l.cancel, l.done
	l.mu.Unlock()
	if done == nil {
		return nil
	}
	cancel()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("still running: %w", ctx.Err())
	}
}

// Funcs returns the Service of a start and a stop function, for a part
// whose own methods start and stop it under other names (a worker's Start
// and Shutdown). stop is called once, and only after start succeeded.
// A nil function does nothing.
func Funcs(start, stop func(ctx context.Context) error) Service {
	return &funcs{start: start, stop: stop}
}

type funcs struct {
	start, stop func(ctx context.Context) error

	mu      sync.Mutex
	running bool
}

func (f *funcs) Start(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.running {
		return errors.New("lifecycle: already started")
	}
	if f.start != nil {
		if err := f.start(ctx); err != nil {
			return err
		}
	}
	f.running = true
	return nil
}

func (f *funcs) Stop(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.running {
		return nil
	}
	f.running = false
	if f.stop == nil {
		return nil
	}
	return f.stop(ctx)
}
