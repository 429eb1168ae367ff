package redistest

import (
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"time"
)

//go:embed clockshim/clockshim.c
var clockShimSrc []byte

// ErrNoCompiler is returned by [NewClock] when no C compiler is found to
// build the clock shim.
var ErrNoCompiler = errors.New("redistest: no C compiler (gcc or $CC) to build the clock shim")

// Clock is an offset to the wall clock of the redis-server processes started
// with [WithClock]: their TIME, key expiry and every other use of the wall
// clock read it, their monotonic clock does not. [Clock.Step] moves it at run
// time, as an NTP step or an operator's `date -s` would.
//
// It works by an LD_PRELOAD library (built from clockshim/clockshim.c with
// the C compiler when the Clock is made) that overrides clock_gettime,
// gettimeofday and time in that process only; it needs Linux (or another
// system with LD_PRELOAD) and a dynamically linked redis-server. (libfaketime
// is not used: it deadlocks with jemalloc, which redis-server links.)
type Clock struct {
	lib  string // the shim library
	path string // the offset file the shim maps

	mu     sync.Mutex
	offset time.Duration
}

// NewClock builds the clock shim in dir with the C compiler ($CC, else gcc,
// else cc) and returns a Clock at offset zero. The error wraps
// [ErrNoCompiler] when there is no compiler; any other error carries the
// compiler's output.
func NewClock(dir string) (*Clock, error) {
	if runtime.GOOS != "linux" {
		return nil, fmt.Errorf("redistest: the clock shim needs Linux's LD_PRELOAD, not %s: %w", runtime.GOOS, ErrNoCompiler)
	}
	cc, err := compiler()
	if err != nil {
		return nil, err
	}
	c := &Clock{lib: filepath.Join(dir, "clockshim.so"), path: filepath.Join(dir, "clock-offset")}
	src := filepath.Join(dir, "clockshim.c")
	if err := os.WriteFile(src, clockShimSrc, 0o600); err != nil {
		return nil, fmt.Errorf("redistest: write the clock shim's source: %w", err)
	}
	out, err := exec.Command(cc, "-shared", "-fPIC", "-O2", "-Wall", "-o", c.lib, src).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("redistest: build the clock shim with %s: %w\n%s", cc, err, out)
	}
	if err := os.WriteFile(c.path, make([]byte, 8), 0o600); err != nil {
		return nil, fmt.Errorf("redistest: write the clock offset file: %w", err)
	}
	return c, nil
}

// compiler returns the C compiler to build the shim with.
func compiler() (string, error) {
	names := []string{"gcc", "cc"}
	if cc := os.Getenv("CC"); cc != "" {
		names = append([]string{cc}, names...)
	}
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: looked for %v on $PATH; install gcc (apt-get install -y gcc) or run `make test`, which installs it when root", ErrNoCompiler, names)
}

// Offset returns the clock's offset to the real wall clock.
func (c *Clock) Offset() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.offset
}

// Step moves the clock by d (negative: back) at once, in every server
// started with it.
func (c *Clock) Step(d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, err := os.OpenFile(c.path, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("redistest: step the clock: %w", err)
	}
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(c.offset+d))
	// written in place, never truncated: the servers have the file mapped
	if _, err := f.WriteAt(b[:], 0); err != nil {
		_ = f.Close()
		return fmt.Errorf("redistest: step the clock: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("redistest: step the clock: %w", err)
	}
	c.offset += d
	return nil
}

// WithClock starts the server with its wall clock read through c (see
// [Clock]).
func WithClock(c *Clock) Option {
	return WithEnv("LD_PRELOAD="+c.lib, "REDISTEST_CLOCK_FILE="+c.path)
}

// WithEnv adds environment variables ("NAME=value") to the server's
// environment, which is otherwise the test process's.
func WithEnv(env ...string) Option {
	return func(c *config) { c.env = append(c.env, env...) }
}
