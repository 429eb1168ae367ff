package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// buildBaton builds ../cmd/baton into dir.
func buildBaton(dir string) (string, error) {
	root, err := filepath.Abs("..")
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(root, "cmd", "baton")); err != nil {
		return "", fmt.Errorf("run from the bench directory (cd bench): %w", err)
	}
	bin := filepath.Join(dir, "baton")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/baton")
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build ../cmd/baton: %w", err)
	}
	return bin, nil
}

// replica is one `baton run` process.
type replica struct {
	id      string
	bin     string
	args    []string
	logPath string
	cmd     *exec.Cmd
	done    chan struct{}
}

func (r *replica) start() error {
	f, err := os.OpenFile(r.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	r.cmd = exec.Command(r.bin, r.args...)
	r.cmd.Stdout, r.cmd.Stderr = f, f
	if err := r.cmd.Start(); err != nil {
		f.Close()
		return err
	}
	r.done = make(chan struct{})
	go func() { _ = r.cmd.Wait(); f.Close(); close(r.done) }()
	return nil
}

func (r *replica) signal(sig syscall.Signal) {
	if r.cmd != nil && r.cmd.Process != nil {
		_ = r.cmd.Process.Signal(sig)
	}
}

// wait waits (bounded) for the process to exit; after d it is SIGKILLed.
func (r *replica) wait(d time.Duration) error {
	if r.done == nil {
		return nil
	}
	select {
	case <-r.done:
		return nil
	case <-time.After(d):
		r.signal(syscall.SIGKILL)
		<-r.done
		return fmt.Errorf("replica %s did not exit within %v", r.id, d)
	}
}

// beat is one heartbeat line.
type beat struct {
	pid     int
	fence   int64
	at      time.Time
	replica string
}

// tail reads complete heartbeat lines appended to a file.
type tail struct {
	path  string
	off   int64
	part  []byte
	beats []beat
}

func (t *tail) poll() error {
	f, err := os.Open(t.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Seek(t.off, 0); err != nil {
		return err
	}
	buf := make([]byte, 1<<16)
	for {
		n, err := f.Read(buf)
		t.off += int64(n)
		t.part = append(t.part, buf[:n]...)
		if err != nil || n == 0 {
			break
		}
	}
	for {
		i := bytes.IndexByte(t.part, '\n')
		if i < 0 {
			break
		}
		fs := strings.Fields(string(t.part[:i]))
		t.part = t.part[i+1:]
		if len(fs) != 4 {
			continue
		}
		pid, err1 := strconv.Atoi(fs[0])
		fence, err2 := strconv.ParseInt(fs[1], 10, 64)
		ns, err3 := strconv.ParseInt(fs[2], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		t.beats = append(t.beats, beat{pid, fence, time.Unix(0, ns), fs[3]})
	}
	return nil
}

// next waits (bounded) for the first heartbeat with a fence above fence.
func (t *tail) next(fence int64, d time.Duration) (beat, error) {
	from := 0
	for end := time.Now().Add(d); ; {
		if err := t.poll(); err != nil {
			return beat{}, err
		}
		for _, b := range t.beats[from:] {
			if b.fence > fence {
				return b, nil
			}
		}
		from = len(t.beats)
		if time.Now().After(end) {
			return beat{}, fmt.Errorf("no heartbeat with a fence above %d within %v", fence, d)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// current waits (bounded) for a fresh heartbeat (written in the last 100ms)
// and returns it: its replica holds the job.
func (t *tail) current(d time.Duration) (beat, error) {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if err := t.poll(); err != nil {
			return beat{}, err
		}
		if n := len(t.beats); n > 0 && time.Since(t.beats[n-1].at) < 100*time.Millisecond {
			return t.beats[n-1], nil
		}
	}
	return beat{}, fmt.Errorf("no fresh heartbeat within %v", d)
}

// logTime returns the time of the last JSON log line in path with message
// msg (and fence, when fence != 0).
func logTime(path, msg string, fence int64) (time.Time, bool) {
	f, err := os.Open(path)
	if err != nil {
		return time.Time{}, false
	}
	defer f.Close()
	var last time.Time
	found := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if !bytes.Contains(sc.Bytes(), []byte(msg)) {
			continue
		}
		var l struct {
			Time  time.Time `json:"time"`
			Msg   string    `json:"msg"`
			Mesg  string    `json:"message"`
			Fence int64     `json:"fence"`
		}
		if json.Unmarshal(sc.Bytes(), &l) != nil || (l.Msg != msg && l.Mesg != msg) || (fence != 0 && l.Fence != fence) {
			continue
		}
		last, found = l.Time, true
	}
	return last, found
}

// sample is one measurement.
type sample struct {
	total    time.Duration // kill or resign -> first heartbeat of the next term
	fromSig  time.Duration // SIGTERM -> first heartbeat (handoff only)
	elected  time.Duration // kill/resign -> "leading: singleton elected" (logged)
	toBeat   time.Duration // elected -> first heartbeat (process start)
	lastBeat time.Duration // old holder's last heartbeat -> kill/resign
}

type ttlResult struct {
	ttl      time.Duration
	failover []sample
	handoff  []sample
	noResign int // handoffs without a "resigned" line (fell back to SIGTERM time)
}

func measureTTL(bin, dir, redisAddr, namespace string, ttl time.Duration, reps int) (*ttlResult, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	beats := filepath.Join(dir, "beats.out")
	cfg := filepath.Join(dir, "baton.yaml")
	y := fmt.Sprintf(`redis:
  url: redis://%s/0
locking:
  fresh_deployment: true
namespace: %s
http:
  listen: ""
worker:
  shutdown_grace: 5s
jobs:
  - name: beat
    mode: singleton
    lock_ttl: %s
    restart_backoff:
      initial: 100ms
      max: 1s
    exec:
      command: ["sh", "-c", "while true; do echo \"$$$$ $BATON_FENCING_TOKEN $(date +%%s%%N) $BATON_REPLICA\" >> %s; sleep 0.02; done"]
`, redisAddr, namespace, ttl, beats)
	if err := os.WriteFile(cfg, []byte(y), 0o644); err != nil {
		return nil, err
	}
	reps3 := map[string]*replica{}
	for i := range 3 {
		id := fmt.Sprintf("r%d", i)
		r := &replica{id: id, bin: bin, logPath: filepath.Join(dir, id+".log"),
			args: []string{"run", "--config", cfg, "--id", id, "--log-format", "json"}}
		if err := r.start(); err != nil {
			return nil, err
		}
		reps3[id] = r
	}
	defer func() {
		for _, r := range reps3 {
			r.signal(syscall.SIGTERM)
		}
		for _, r := range reps3 {
			_ = r.wait(20 * time.Second)
		}
	}()
	tl := &tail{path: beats}
	wait := ttl + 10*time.Second
	// holder is the replica whose heartbeat is the latest
	holder := func() (beat, *replica, error) {
		cur, err := tl.current(wait)
		if err != nil {
			return beat{}, nil, err
		}
		r := reps3[cur.replica]
		if r == nil {
			return beat{}, nil, fmt.Errorf("heartbeat from unknown replica %q", cur.replica)
		}
		return cur, r, nil
	}
	res := &ttlResult{ttl: ttl}
	logf("lock_ttl %v: %d SIGKILL failovers, then %d SIGTERM handoffs", ttl, reps, reps)

	for i := range reps {
		// A random point in the lease's renewal cycle: without it every kill
		// would land the same time after the previous take-over.
		time.Sleep(rand.N(ttl))
		cur, r, err := holder()
		if err != nil {
			return nil, err
		}
		kill := time.Now()
		r.signal(syscall.SIGKILL)
		nb, err := tl.next(cur.fence, wait)
		if err != nil {
			return nil, fmt.Errorf("failover %d: %w", i, err)
		}
		s := sample{total: nb.at.Sub(kill), lastBeat: kill.Sub(lastOf(tl.beats, cur.fence))}
		if el, ok := logTime(reps3[nb.replica].logPath, "leading: singleton elected", nb.fence); ok {
			s.elected, s.toBeat = el.Sub(kill), nb.at.Sub(el)
		}
		res.failover = append(res.failover, s)
		logf("  failover %2d: %s -> %s in %v", i+1, cur.replica, nb.replica, s.total.Round(time.Millisecond))
		if err := r.wait(5 * time.Second); err != nil {
			return nil, err
		}
		if err := r.start(); err != nil {
			return nil, err
		}
		time.Sleep(500 * time.Millisecond) // the restarted replica campaigns
	}

	for i := range reps {
		cur, r, err := holder()
		if err != nil {
			return nil, err
		}
		sig := time.Now()
		r.signal(syscall.SIGTERM)
		nb, err := tl.next(cur.fence, wait)
		if err != nil {
			return nil, fmt.Errorf("handoff %d: %w", i, err)
		}
		if err := r.wait(20 * time.Second); err != nil {
			return nil, err
		}
		from := sig
		if rt, ok := logTime(r.logPath, "resigned", cur.fence); ok {
			from = rt
		} else {
			res.noResign++
		}
		s := sample{total: nb.at.Sub(from), fromSig: nb.at.Sub(sig), lastBeat: from.Sub(lastOf(tl.beats, cur.fence))}
		if el, ok := logTime(reps3[nb.replica].logPath, "leading: singleton elected", nb.fence); ok {
			s.elected, s.toBeat = el.Sub(from), nb.at.Sub(el)
		}
		res.handoff = append(res.handoff, s)
		logf("  handoff %2d: %s -> %s in %v (from SIGTERM %v)", i+1, cur.replica, nb.replica,
			s.total.Round(time.Millisecond), s.fromSig.Round(time.Millisecond))
		if err := r.start(); err != nil {
			return nil, err
		}
		time.Sleep(500 * time.Millisecond)
	}
	return res, nil
}

// lastOf returns the time of the last heartbeat of fence.
func lastOf(bs []beat, fence int64) time.Time {
	var t time.Time
	for _, b := range bs {
		if b.fence == fence && b.at.After(t) {
			t = b.at
		}
	}
	return t
}
