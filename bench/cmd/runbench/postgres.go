package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgServer is a throwaway PostgreSQL cluster: initdb'd in a temp dir, run on a
// free loopback port, removed at close.
type pgServer struct {
	dir     string
	port    int
	cmd     *exec.Cmd
	exited  chan struct{}
	version string
	runAs   string
}

// dsn is the connection string of the cluster's "postgres" database.
func (p *pgServer) dsn() string {
	return fmt.Sprintf("postgres://bench@127.0.0.1:%d/postgres?sslmode=disable", p.port)
}

// pgBinDir finds the directory holding initdb and postgres: $PATH,
// /usr/local/bin, then the newest /usr/lib/postgresql/*/bin.
func pgBinDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if _, err := exec.LookPath("postgres"); err == nil {
			return filepath.Dir(p), nil
		}
	}
	for _, d := range []string{"/usr/local/bin"} {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "postgres")) {
			return d, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return pgMajor(dirs[i]) > pgMajor(dirs[j]) })
	for _, d := range dirs {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "postgres")) {
			return d, nil
		}
	}
	return "", errors.New("no initdb and postgres on $PATH, in /usr/local/bin or /usr/lib/postgresql/*/bin")
}

func pgMajor(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

func isExec(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// installPostgres installs Debian's postgresql package (root only), as the
// test setup installs redis-server.
func installPostgres(ctx context.Context) error {
	if os.Geteuid() != 0 {
		return errors.New("postgresql is not installed and this is not root: install Debian's postgresql package (apt-get install postgresql)")
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return errors.New("postgresql is not installed and there is no apt-get to install it")
	}
	logf("installing postgresql with apt-get (up to 10 minutes)")
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	env := append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	install := func() error {
		c := exec.CommandContext(ctx, "apt-get", "install", "-y", "--no-install-recommends", "postgresql")
		c.Env = env
		out, err := c.CombinedOutput()
		if err != nil {
			return fmt.Errorf("apt-get install postgresql: %w: %s", err, tail(out, 800))
		}
		return nil
	}
	if install() == nil {
		return nil
	}
	c := exec.CommandContext(ctx, "apt-get", "update")
	c.Env = env
	if out, err := c.CombinedOutput(); err != nil {
		return fmt.Errorf("apt-get update: %w: %s", err, tail(out, 800))
	}
	return install()
}

func tail(b []byte, n int) string {
	s := strings.TrimSpace(string(b))
	if len(s) > n {
		s = "..." + s[len(s)-n:]
	}
	return s
}

// runAsUser is the account PostgreSQL runs as when this is root (postgres
// refuses to run as root): "postgres" if it exists, else "nobody".
func runAsUser() (*user.User, *syscall.Credential, error) {
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.Atoi(u.Uid)
		gid, err2 := strconv.Atoi(u.Gid)
		if err1 != nil || err2 != nil {
			continue
		}
		return u, &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
	}
	return nil, nil, errors.New("running as root and there is neither a postgres nor a nobody account to run PostgreSQL as")
}

// startPostgres finds (or installs) PostgreSQL, initdb's a cluster in a temp
// dir and starts it on a free loopback port with durability off (fsync,
// synchronous_commit and full_page_writes off: the Redis side runs without
// persistence too).
func startPostgres(ctx context.Context) (*pgServer, error) {
	bin, err := pgBinDir()
	if err != nil {
		if ierr := installPostgres(ctx); ierr != nil {
			return nil, ierr
		}
		if bin, err = pgBinDir(); err != nil {
			return nil, fmt.Errorf("after installing postgresql: %w", err)
		}
	}
	dir, err := os.MkdirTemp("", "runbench-pg-")
	if err != nil {
		return nil, err
	}
	p := &pgServer{dir: dir, exited: make(chan struct{})}
	ok := false
	defer func() {
		if !ok {
			_ = os.RemoveAll(dir)
		}
	}()
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, c, err := runAsUser()
		if err != nil {
			return nil, err
		}
		cred = c
		p.runAs = u.Username
		if err := os.Chown(dir, int(c.Uid), int(c.Gid)); err != nil {
			return nil, err
		}
	}
	data := filepath.Join(dir, "data")
	if out, err := exec.Command(filepath.Join(bin, "postgres"), "--version").Output(); err == nil {
		p.version = strings.TrimSpace(string(out))
	}
	ictx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	initdb := exec.CommandContext(ictx, filepath.Join(bin, "initdb"), "-D", data, "-U", "bench", "--auth=trust", "-E", "UTF8", "--no-sync", "--locale=C")
	initdb.Dir = dir
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %w: %s", err, tail(out, 800))
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p.port = l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	logFile, err := os.Create(filepath.Join(dir, "postgres.log"))
	if err != nil {
		return nil, err
	}
	defer func() { _ = logFile.Close() }()
	if cred != nil {
		_ = logFile.Chown(int(cred.Uid), int(cred.Gid))
	}
	p.cmd = exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(p.port), "-k", dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
		"-c", "full_page_writes=off", "-c", "max_connections=200", "-c", "shared_buffers=256MB")
	p.cmd.Dir = dir
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
		conn, err := pgx.Connect(cctx, p.dsn())
		if err == nil {
			_ = conn.Close(cctx)
			ccancel()
			break
		}
		ccancel()
		select {
		case <-p.exited:
			b, _ := os.ReadFile(filepath.Join(dir, "postgres.log"))
			return nil, fmt.Errorf("postgres exited at start: %s", tail(b, 800))
		default:
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("postgres not accepting connections after 60s: %w", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	ok = true
	return p, nil
}

// stop shuts the cluster down (fast shutdown, then SIGKILL after 15s) and
// removes its directory.
func (p *pgServer) stop() {
	if p.cmd != nil && p.cmd.Process != nil {
		_ = p.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-p.exited:
		case <-time.After(15 * time.Second):
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			select {
			case <-p.exited:
			case <-time.After(5 * time.Second):
			}
		}
	}
	_ = os.RemoveAll(p.dir)
}
