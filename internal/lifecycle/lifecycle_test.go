package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// recorder is a part that writes its starts and stops into a shared log.
type recorder struct {
	name     string
	log      *[]string
	startErr error
	stopErr  error
}

func (r *recorder) Start(context.Context) error {
	*r.log = append(*r.log, "start "+r.name)
	return r.startErr
}

func (r *recorder) Stop(context.Context) error {
	*r.log = append(*r.log, "stop "+r.name)
	return r.stopErr
}

func parts(log *[]string, names ...string) ([]Part, map[string]*recorder) {
	var out []Part
	by := map[string]*recorder{}
	for _, n := range names {
		r := &recorder{name: n, log: log}
		by[n] = r
		out = append(out, Part{Name: n, Service: r})
	}
	return out, by
}

func TestAGroupStopsInReverseOfItsStart(t *testing.T) {
	var log []string
	ps, _ := parts(&log, "follower", "worker", "claims")
	g := NewGroup(ps...)
	if err := g.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := g.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := g.Stop(t.Context()); err != nil {
		t.Fatalf("second stop: %v", err)
	}
	want := []string{"start follower", "start worker", "start claims", "stop claims", "stop worker", "stop follower"}
	if !slices.Equal(log, want) {
		t.Errorf("log %q, want %q", log, want)
	}
	if err := g.Start(t.Context()); err == nil {
		t.Error("a stopped group started again")
	}
}

func TestAFailedStartStopsWhatStartedBeforeIt(t *testing.T) {
	var log []string
	ps, by := parts(&log, "follower", "worker", "claims")
	by["worker"].startErr = errors.New("no Redis")
	err := NewGroup(ps...).Start(t.Context())
	if err == nil || err.Error() != "start worker: no Redis" {
		t.Fatalf("error %v, want the failed part named", err)
	}
	want := []string{"start follower", "start worker", "stop follower"}
	if !slices.Equal(log, want) {
		t.Errorf("log %q, want %q", log, want)
	}
}

func TestStopStopsEveryPartEvenAfterOneFailed(t *testing.T) {
	var log []string
	ps, by := parts(&log, "a", "b", "c")
	by["b"].stopErr = errors.New("stuck")
	by["c"].stopErr = errors.New("late")
	g := NewGroup(ps...)
	if err := g.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	err := g.Stop(t.Context())
	if err == nil || !strings.Contains(err.Error(), "stop b: stuck") || !strings.Contains(err.Error(), "stop c: late") {
		t.Errorf("error %v, want both parts' errors named", err)
	}
	if want := []string{"start a", "start b", "start c", "stop c", "stop b", "stop a"}; !slices.Equal(log, want) {
		t.Errorf("log %q, want %q", log, want)
	}
}

// A group inside a group stops as one part, in its turn.
func TestAGroupIsAPartOfAnother(t *testing.T) {
	var log []string
	inner, _ := parts(&log, "leadership", "scheduler")
	outer, _ := parts(&log, "worker")
	g := NewGroup(append(outer, Part{Name: "claims", Service: NewGroup(inner...)})...)
	if err := g.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := g.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	want := []string{"start worker", "start leadership", "start scheduler", "stop scheduler", "stop leadership", "stop worker"}
	if !slices.Equal(log, want) {
		t.Errorf("log %q, want %q", log, want)
	}
}

// A loop runs until Stop, not until the context it was started with ends:
// a part is stopped in its turn.
func TestALoopRunsUntilStopNotUntilItsStartContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	running := make(chan context.Context, 1)
	l := NewLoop(func(ctx context.Context) error {
		running <- ctx
		<-ctx.Done()
		return fmt.Errorf("stopped: %w", context.Cause(ctx))
	})
	if err := l.Start(ctx); err != nil {
		t.Fatal(err)
	}
	rctx := <-running
	cancel()
	if rctx.Err() != nil {
		t.Fatal("the loop's context ended with its start context")
	}
	if err := l.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := l.Err(); err == nil || !errors.Is(err, context.Canceled) {
		t.Errorf("Err %v, want what the function returned", err)
	}
	if err := l.Start(t.Context()); err == nil {
		t.Error("a loop started twice")
	}
}

// A loop whose function returns by itself says so on Done, with its error.
func TestALoopThatEndsByItselfClosesDone(t *testing.T) {
	boom := errors.New("boom")
	l := NewLoop(func(context.Context) error { return boom })
	if l.Done() != nil {
		t.Fatal("Done before Start is not nil")
	}
	if err := l.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	<-l.Done()
	if !errors.Is(l.Err(), boom) {
		t.Errorf("Err %v", l.Err())
	}
	if err := l.Stop(t.Context()); err != nil {
		t.Errorf("Stop after the end: %v", err)
	}
}

// Stop waits for a loop's function no longer than its context.
func TestALoopThatIgnoresItsContextIsWaitedForNoLongerThanStops(t *testing.T) {
	release := make(chan struct{})
	l := NewLoop(func(context.Context) error { <-release; return nil })
	if err := l.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := l.Stop(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Stop past its context: %v", err)
	}
	close(release)
	<-l.Done()
}

func TestFuncsStopsOnlyWhatStartedAndOnce(t *testing.T) {
	var stops int
	fail := true
	s := Funcs(func(context.Context) error {
		if fail {
			return errors.New("no")
		}
		return nil
	}, func(context.Context) error { stops++; return nil })
	if err := s.Stop(t.Context()); err != nil || stops != 0 {
		t.Fatalf("stop before start: %v, %d stops", err, stops)
	}
	if err := s.Start(t.Context()); err == nil {
		t.Fatal("start error lost")
	}
	if _ = s.Stop(t.Context()); stops != 0 {
		t.Fatal("stopped a part whose start failed")
	}
	fail = false
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	_ = s.Stop(t.Context())
	_ = s.Stop(t.Context())
	if stops != 1 {
		t.Errorf("%d stops, want 1", stops)
	}
}

// ctxPart records whether the context its Stop got had ended.
type ctxPart struct{ ended *[]bool }

func (ctxPart) Start(context.Context) error { return nil }
func (c ctxPart) Stop(ctx context.Context) error {
	*c.ended = append(*c.ended, ctx.Err() != nil)
	return nil
}

// A part whose turn comes after the stop's context ended (the worker
// before it used up the shutdown's time) still gets time to stop: a
// follower is not abandoned, its Redis closed under it.
func TestAPartStoppedAfterTheDeadlinePassedStillGetsTimeToStop(t *testing.T) {
	var ended []bool
	ctx, cancel := context.WithCancel(t.Context())
	g := NewGroup(
		Part{Name: "follower", Service: ctxPart{&ended}},
		Part{Name: "worker", Service: Funcs(nil, func(context.Context) error { cancel(); return nil })},
	)
	if err := g.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := g.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ended, []bool{false}) {
		t.Errorf("the follower's stop context had ended: %v", ended)
	}
}
