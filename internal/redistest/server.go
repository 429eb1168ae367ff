package redistest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// defaultStartTimeout bounds how long Start and Restart wait for PING.
	defaultStartTimeout = 5 * time.Second
	// exitTimeout bounds how long we wait for a signalled process to exit.
	exitTimeout = 5 * time.Second
	// portAttempts is how many free ports Start tries before giving up.
	portAttempts = 5
	// logTailLines is how many log lines go into start errors.
	logTailLines = 25
)

// errPortInUse marks a launch that failed because the port was taken.
var errPortInUse = errors.New("port already in use")

// config holds the settings applied by Options.
type config struct {
	args         []string
	env          []string // added to the server's environment
	startTimeout time.Duration
}

// Option configures a [Server] created by [Start], [New] or [NewN].
type Option func(*config)

// WithArgs appends extra redis-server command-line arguments, for example
// WithArgs("--maxmemory", "10mb", "--maxmemory-policy", "allkeys-lru").
// They come after the harness's own arguments, so they can override them
// (but overriding --port, --bind or --dir breaks the harness).
func WithArgs(args ...string) Option {
	return func(c *config) { c.args = append(c.args, args...) }
}

// WithStartTimeout sets how long [Start] and [Server.Restart] wait for the
// server to answer PING (default 5s).
func WithStartTimeout(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.startTimeout = d
		}
	}
}

// process is one run of redis-server.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once Wait has returned
}

// exited reports whether the process has exited and been reaped.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// signal sends sig unless the process has already been reaped.
func (p *process) signal(sig os.Signal) error {
	if p.exited() {
		return nil
	}
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return nil
}

// wait waits at most d for the process to exit.
func (p *process) wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.done:
		return true
	case <-t.C:
		return false
	}
}

// kill sends SIGKILL and waits, bounded, for the process to exit.
func (p *process) kill() error {
	if err := p.signal(syscall.SIGKILL); err != nil {
		return fmt.Errorf("redistest: kill redis-server pid %d: %w", p.cmd.Process.Pid, err)
	}
	if !p.wait(exitTimeout) {
		return fmt.Errorf("redistest: redis-server pid %d did not exit within %v of SIGKILL", p.cmd.Process.Pid, exitTimeout)
	}
	return nil
}

// Server is one real redis-server process on a free loopback port, data in a
// temp dir, no persistence (save "" and appendonly no). Its methods are safe
// for concurrent use.
type Server struct {
	cfg     config
	binary  string
	dir     string // temp root, removed by Close
	dataDir string // --dir, wiped on every (re)start
	logPath string // redis-server stdout+stderr, appended across restarts
	port    int
	addr    string

	mu      sync.Mutex
	proc    *process // latest run; nil before the first successful start
	paused  bool
	closed  bool
	clients []*redis.Client
}

// Start launches redis-server on a free loopback port and waits (bounded by
// the start timeout, 5s by default) until it answers PING. It does not depend
// on package testing, so benchmarks and other harnesses can use it; the
// caller must Close the server. On failure the error includes the tail of
// redis-server's log.
func Start(opts ...Option) (*Server, error) {
	cfg := config{startTimeout: defaultStartTimeout}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "redistest-")
	if err != nil {
		return nil, fmt.Errorf("redistest: create temp dir: %w", err)
	}
	s := &Server{
		cfg:     cfg,
		binary:  bin,
		dir:     dir,
		dataDir: filepath.Join(dir, "data"),
		logPath: filepath.Join(dir, "redis.log"),
	}
	var lastErr error
	for range portAttempts {
		port, err := freePort()
		if err != nil {
			lastErr = err
			continue
		}
		p, err := s.launch(port)
		if err == nil {
			s.port, s.addr, s.proc = port, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), p
			return s, nil
		}
		lastErr = err
		if !errors.Is(err, errPortInUse) {
			break
		}
	}
	_ = os.RemoveAll(dir)
	return nil, lastErr
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("redistest: find free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// launch starts redis-server on port with an empty data dir and waits until it
// answers. On failure the process has exited and the error carries the log.
func (s *Server) launch(port int) (*process, error) { return s.launchKeep(port, false) }

// launchKeep is launch; with keep the data dir is kept, so the server loads
// the snapshot (dump.rdb) saved there.
func (s *Server) launchKeep(port int, keep bool) (*process, error) {
	if keep {
		// nothing to wipe
	} else if err := os.RemoveAll(s.dataDir); err != nil {
		return nil, fmt.Errorf("redistest: wipe data dir: %w", err)
	}
	if err := os.MkdirAll(s.dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("redistest: create data dir: %w", err)
	}
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("redistest: open log: %w", err)
	}
	var logStart int64
	if fi, err := logf.Stat(); err == nil {
		logStart = fi.Size()
	}
	args := append([]string{
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", s.dataDir,
		"--protected-mode", "no",
		"--daemonize", "no",
	}, s.cfg.args...)
	cmd := exec.Command(s.binary, args...)
	if len(s.cfg.env) > 0 {
		cmd.Env = append(os.Environ(), s.cfg.env...)
	}
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = ChildProcAttr()
	err = cmd.Start()
	_ = logf.Close() // the child has its own descriptor
	if err != nil {
		return nil, fmt.Errorf("redistest: start %s: %w", s.binary, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()

	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	werr := waitReady(addr, p, s.cfg.startTimeout)
	if werr == nil {
		return p, nil
	}
	kerr := p.kill()
	tail := s.logTail(logStart)
	err = fmt.Errorf("redistest: redis-server on %s: %w\n--- redis-server log tail (%s) ---\n%s", addr, werr, s.logPath, tail)
	if strings.Contains(tail, "Address already in use") {
		err = fmt.Errorf("%w: %w", errPortInUse, err)
	}
	return nil, errors.Join(err, kerr)
}

// waitReady polls addr until our process answers PING, the process exits, or
// timeout passes.
func waitReady(addr string, p *process, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	pid := p.cmd.Process.Pid
	var lastErr error
	for {
		if p.exited() {
			return fmt.Errorf("exited before answering PING: %v", p.cmd.ProcessState)
		}
		if lastErr = ping(addr, pid); lastErr == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no PING answer within %v: %w", timeout, lastErr)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ping sends PING and INFO server over a raw connection and checks the answer
// came from process pid (not some other server that owns the port).
func ping(addr string, pid int) error {
	conn, err := net.DialTimeout("tcp", addr, 250*time.Millisecond)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(500 * time.Millisecond)); err != nil {
		return err
	}
	if _, err := io.WriteString(conn, "*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n"); err != nil {
		return err
	}
	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" {
		return fmt.Errorf("PING answered %q", strings.TrimSpace(line))
	}
	line, err = r.ReadString('\n')
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "$")))
	if !strings.HasPrefix(line, "$") || err != nil || n < 0 {
		return fmt.Errorf("INFO answered %q", strings.TrimSpace(line))
	}
	info := make([]byte, n)
	if _, err := io.ReadFull(r, info); err != nil {
		return err
	}
	if !bytes.Contains(info, []byte("\nprocess_id:"+strconv.Itoa(pid)+"\r")) {
		return fmt.Errorf("a different server answers on %s", addr)
	}
	return nil
}

// logTail returns the last lines of the log written since offset.
func (s *Server) logTail(offset int64) string {
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	if offset > 0 && offset <= int64(len(b)) {
		b = b[offset:]
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > logTailLines {
		lines = lines[len(lines)-logTailLines:]
	}
	return strings.Join(lines, "\n")
}

// Addr returns the server's "127.0.0.1:PORT" address. It stays the same
// across Restart.
func (s *Server) Addr() string { return s.addr }

// LogPath returns the file that collects redis-server's output across
// restarts. It is removed by Close.
func (s *Server) LogPath() string { return s.logPath }

// Client returns a new go-redis client for the server with test-friendly
// defaults: ContextTimeoutEnabled, 1s dial/read/write timeouts and no retries
// (MaxRetries -1, go-redis's spelling of zero retries; DialerRetries 1, so a
// refused dial fails at once instead of after go-redis's default 5 attempts
// 100ms apart). opts run last and may
// override anything, including Addr (for example to go through a [Proxy]).
// The caller should Close the client; Server.Close closes it too.
func (s *Server) Client(opts ...func(*redis.Options)) *redis.Client {
	o := &redis.Options{
		Addr:                  s.addr,
		ContextTimeoutEnabled: true,
		DialTimeout:           time.Second,
		ReadTimeout:           time.Second,
		WriteTimeout:          time.Second,
		MaxRetries:            -1,
		DialerRetries:         1,
	}
	for _, opt := range opts {
		if opt != nil {
			opt(o)
		}
	}
	c := redis.NewClient(o)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		_ = c.Close()
		return c
	}
	s.clients = append(s.clients, c)
	return c
}

// Stop shuts the server down gracefully (SIGTERM; continues it first if
// paused) and waits for it to exit. If it does not exit within 5s it is
// killed and an error is returned. Stopping a server that is not running is a
// no-op.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil || s.proc.exited() {
		return nil
	}
	p := s.proc
	if err := p.signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("redistest: stop redis-server: %w", err)
	}
	if s.paused {
		_ = p.signal(syscall.SIGCONT) // a stopped process handles SIGTERM only once continued
		s.paused = false
	}
	if p.wait(exitTimeout) {
		return nil
	}
	kerr := p.kill()
	return errors.Join(fmt.Errorf("redistest: redis-server on %s ignored SIGTERM for %v; killed it", s.addr, exitTimeout), kerr)
}

// Kill sends SIGKILL (a crash: nothing is flushed) and waits for the process
// to exit. Killing a server that is not running is a no-op.
func (s *Server) Kill() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return nil
	}
	s.paused = false
	return s.proc.kill()
}

// Pause freezes the server with SIGSTOP: connections stay open and new ones
// are still accepted by the kernel, but no command is answered until Resume.
func (s *Server) Pause() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil || s.proc.exited() {
		return errors.New("redistest: Pause: redis-server is not running")
	}
	if err := s.proc.signal(syscall.SIGSTOP); err != nil {
		return fmt.Errorf("redistest: Pause: %w", err)
	}
	s.paused = true
	waitStopped(s.proc.cmd.Process.Pid, time.Second)
	return nil
}

// Resume continues a paused server with SIGCONT.
func (s *Server) Resume() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil || s.proc.exited() {
		return errors.New("redistest: Resume: redis-server is not running")
	}
	if err := s.proc.signal(syscall.SIGCONT); err != nil {
		return fmt.Errorf("redistest: Resume: %w", err)
	}
	s.paused = false
	return nil
}

// Restart kills the server if it is running, then starts it again on the
// same port with EMPTY data (the data dir is wiped) and waits until it
// answers PING. Existing clients reconnect on their next command; pooled
// connections to the old process are dead.
func (s *Server) Restart() error { return s.restart(false) }

// RestartFromSnapshot kills the server (no save at exit) and starts it again
// on the same port from the last snapshot written by [Server.Save]: a
// restart that loads data older than the last writes, as after a crash of a
// server persisting with RDB snapshots.
func (s *Server) RestartFromSnapshot() error { return s.restart(true) }

// Save writes a snapshot (SAVE) that RestartFromSnapshot will load.
func (s *Server) Save() error {
	c := redis.NewClient(&redis.Options{Addr: s.addr})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Save(ctx).Err(); err != nil {
		return fmt.Errorf("redistest: SAVE: %w", err)
	}
	return nil
}

func (s *Server) restart(keep bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("redistest: Restart: server is closed")
	}
	if s.proc != nil {
		if err := s.proc.kill(); err != nil {
			return err
		}
	}
	s.paused = false
	var err error
	for attempt := range portAttempts {
		if attempt > 0 {
			time.Sleep(100 * time.Millisecond)
		}
		var p *process
		if p, err = s.launchKeep(s.port, keep); err == nil {
			s.proc = p
			return nil
		}
		if !errors.Is(err, errPortInUse) {
			break
		}
	}
	return err
}

// Running reports whether the redis-server process is alive (a paused server
// counts as running).
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc != nil && !s.proc.exited()
}

// Close closes the clients made by Client and TestClient, kills the process
// (continuing it first if paused) and removes the temp dir. It is idempotent.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	var errs []error
	for _, c := range s.clients {
		if err := c.Close(); err != nil && !errors.Is(err, redis.ErrClosed) {
			errs = append(errs, err)
		}
	}
	s.clients = nil
	if s.proc != nil && !s.proc.exited() {
		if s.paused {
			_ = s.proc.signal(syscall.SIGCONT)
			s.paused = false
		}
		errs = append(errs, s.proc.kill())
	}
	if err := os.RemoveAll(s.dir); err != nil {
		errs = append(errs, fmt.Errorf("redistest: remove temp dir: %w", err))
	}
	return errors.Join(errs...)
}
