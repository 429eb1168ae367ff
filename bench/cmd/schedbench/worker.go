package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// workerArg, as the first argument, turns the binary into the no-op asynq
// worker: a separate process, so that its CPU is measured apart from the
// schedulers'. It prints "R" once serving, then "H <task id> <unix ns>" at the
// start of every task it handles and "C <commands sent>" every 20ms, and
// shuts down when its stdin closes.
const workerArg = "__schedbench_worker"

func workerMain(args []string) int {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	addr := fs.String("addr", "", "redis address")
	conc := fs.Int("concurrency", 64, "asynq Concurrency")
	check := fs.Duration("check", 20*time.Millisecond, "asynq TaskCheckInterval")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	redis.SetLogger(quietRedis{})
	ctr := &counter{}
	rdb := newClient(*addr, ctr)
	defer func() { _ = rdb.Close() }()

	var mu sync.Mutex
	out := bufio.NewWriterSize(os.Stdout, 1<<16)
	emit := func(format string, a ...any) {
		mu.Lock()
		fmt.Fprintf(out, format, a...)
		mu.Unlock()
	}
	srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{
		Concurrency:       *conc,
		TaskCheckInterval: *check,
		Queues:            map[string]int{"baton:default": 1}, // the queue of a config queue "default" in namespace "baton"
		LogLevel:          asynq.ErrorLevel,
		ShutdownTimeout:   3 * time.Second,
	})
	handler := asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
		now := time.Now().UnixNano()
		id, _ := asynq.GetTaskID(ctx)
		emit("H %s %d\n", id, now)
		return nil
	})
	if err := srv.Start(handler); err != nil {
		fmt.Fprintln(os.Stderr, "schedbench worker:", err)
		return 1
	}
	emit("R\n")
	flush := func() {
		mu.Lock()
		fmt.Fprintf(out, "C %d\n", ctr.cmds.Load())
		_ = out.Flush()
		mu.Unlock()
	}
	flush()
	stdinDone := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(stdinDone)
	}()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	// bounded: the parent closes stdin at the end of every cell; a worker
	// left alone stops after an hour.
	deadline := time.After(time.Hour)
loop:
	for {
		select {
		case <-stdinDone:
			break loop
		case <-deadline:
			break loop
		case <-tick.C:
			flush()
		}
	}
	srv.Shutdown()
	flush()
	return 0
}

// handled is what the worker reported for one task ID.
type handled struct {
	n     int
	first int64 // unix ns of the first start
}

// workerProc is the parent's handle on a worker process.
type workerProc struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	done    chan struct{} // reader finished (stdout closed)
	ready   chan struct{}
	cmdsN   atomic.Int64
	mu      sync.Mutex
	tasks   map[string]*handled
	nLines  atomic.Int64
	waitErr error
}

func (e *env) startWorker() (*workerProc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	argv := []string{exe, workerArg, "-addr", e.addr, "-concurrency", strconv.Itoa(e.cfg.workerConc), "-check", e.cfg.checkEvery.String()}
	if e.cfg.workerNice != 0 {
		if nice, err := exec.LookPath("nice"); err == nil {
			argv = append([]string{nice, "-n", strconv.Itoa(e.cfg.workerNice)}, argv...)
		}
	}
	w := &workerProc{cmd: exec.Command(argv[0], argv[1:]...), done: make(chan struct{}), ready: make(chan struct{}), tasks: map[string]*handled{}}
	w.cmd.Stderr = os.Stderr
	if w.stdin, err = w.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := w.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := w.cmd.Start(); err != nil {
		return nil, err
	}
	go w.read(stdout)
	select {
	case <-w.ready:
		return w, nil
	case <-w.done:
		_ = w.cmd.Wait()
		return nil, errors.New("worker exited before serving")
	case <-time.After(10 * time.Second):
		w.stop()
		return nil, errors.New("worker not ready within 10s")
	}
}

func (w *workerProc) read(r io.Reader) {
	defer close(w.done)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	readyOnce := sync.Once{}
	for sc.Scan() {
		l := sc.Text()
		switch {
		case l == "R":
			readyOnce.Do(func() { close(w.ready) })
		case strings.HasPrefix(l, "C "):
			n, _ := strconv.ParseInt(l[2:], 10, 64)
			w.cmdsN.Store(n)
		case strings.HasPrefix(l, "H "):
			f := strings.Fields(l)
			if len(f) != 3 {
				continue
			}
			ns, _ := strconv.ParseInt(f[2], 10, 64)
			w.nLines.Add(1)
			w.mu.Lock()
			h := w.tasks[f[1]]
			if h == nil {
				h = &handled{first: ns}
				w.tasks[f[1]] = h
			}
			h.n++
			if ns < h.first {
				h.first = ns
			}
			w.mu.Unlock()
		}
	}
}

func (w *workerProc) pid() int {
	if w == nil || w.cmd.Process == nil {
		return 0
	}
	return w.cmd.Process.Pid
}

func (w *workerProc) cmds() int64 {
	if w == nil {
		return 0
	}
	return w.cmdsN.Load()
}

// get returns what the worker reported for task id.
func (w *workerProc) get(id string) handled {
	w.mu.Lock()
	defer w.mu.Unlock()
	if h := w.tasks[id]; h != nil {
		return *h
	}
	return handled{}
}

// all returns a copy of every report.
func (w *workerProc) all() map[string]handled {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]handled, len(w.tasks))
	for k, v := range w.tasks {
		out[k] = *v
	}
	return out
}

// waitHandled waits, polling every 50ms, until done() holds or d passes.
func (w *workerProc) waitHandled(d time.Duration, done func() bool) bool {
	end := time.Now().Add(d)
	for i := 0; i < 100000 && time.Now().Before(end); i++ {
		if done() {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return done()
}

// stop closes the worker's stdin and waits (10s, then SIGKILL) for it to exit.
func (w *workerProc) stop() {
	_ = w.stdin.Close()
	select {
	case <-w.done:
	case <-time.After(10 * time.Second):
		_ = w.cmd.Process.Kill()
		<-w.done
	}
	w.waitErr = w.cmd.Wait()
}
