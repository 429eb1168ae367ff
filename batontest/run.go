package batontest

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"sync"
	"testing"
)

// Run calls f with a testing.TB of its own and runs its cleanups when f
// returns, then reports whether f failed: for examples and programs that
// use an Env outside `go test`. Failures and logs are written to w (an
// Example's output shows them); Fatal ends f as it ends a test. The TB
// supports what an Env and a plain test use: Helper, Cleanup, Context,
// Error(f), Fatal(f), Fail, FailNow, Failed, Log(f), Name and TempDir.
func Run(w io.Writer, f func(t testing.TB)) (failed bool) {
	if w == nil {
		w = os.Stdout
	}
	tb := &runTB{w: w}
	ctx, cancel := context.WithCancel(context.Background())
	tb.ctx = ctx
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer tb.cleanup()
		defer cancel() // a test's context ends before its cleanups run
		f(tb)
	}()
	<-done
	return tb.Failed()
}

// runTB is Run's testing.TB. The embedded interface is nil: a method it
// does not implement panics.
type runTB struct {
	testing.TB
	w        io.Writer
	ctx      context.Context
	mu       sync.Mutex
	failed   bool
	cleanups []func()
}

func (t *runTB) Helper()                    {}
func (t *runTB) Name() string               { return "batontest.Run" }
func (t *runTB) Context() context.Context   { return t.ctx }
func (t *runTB) Log(args ...any)            { t.print(fmt.Sprintln(args...)) }
func (t *runTB) Logf(f string, args ...any) { t.print(fmt.Sprintf(f, args...)) }
func (t *runTB) Error(args ...any)          { t.Log(args...); t.Fail() }
func (t *runTB) Errorf(f string, a ...any)  { t.Logf(f, a...); t.Fail() }
func (t *runTB) Fatal(args ...any)          { t.Log(args...); t.FailNow() }
func (t *runTB) Fatalf(f string, a ...any)  { t.Logf(f, a...); t.FailNow() }
func (t *runTB) FailNow()                   { t.Fail(); runtime.Goexit() }

func (t *runTB) Fail() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.failed = true
}

func (t *runTB) Failed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.failed
}

func (t *runTB) Cleanup(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cleanups = append(t.cleanups, f)
}

func (t *runTB) TempDir() string {
	dir, err := os.MkdirTemp("", "batontest")
	if err != nil {
		t.Fatalf("TempDir: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func (t *runTB) print(s string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(s) == 0 || s[len(s)-1] != '\n' {
		s += "\n"
	}
	_, _ = io.WriteString(t.w, s)
}

// cleanup runs the cleanups, last registered first.
func (t *runTB) cleanup() {
	t.mu.Lock()
	cs := slices.Clone(t.cleanups)
	t.cleanups = nil
	t.mu.Unlock()
	for _, f := range slices.Backward(cs) {
		f()
	}
}
