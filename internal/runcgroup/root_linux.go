package runcgroup

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Root is a cgroup v2 directory that the runs' cgroups are made in. It is
// safe for concurrent use.
type Root struct {
	dir   string
	owner string // Owner(this process): what its cgroups' names start with
	pidNS string // this process's pid namespace, as in owner
}

// Open returns the Root at dir, a cgroup v2 directory; "" means the cgroup
// this process runs in. It checks that the runs' cgroups can be made there
// and that this process may start processes in them, by making one and
// removing it. An error wraps ErrUnavailable and says what is missing: a
// cgroup2 mount, write access (to dir, and to cgroup.procs of the lowest
// cgroup above both dir and this process), or a kernel that starts a
// process in a cgroup (5.7). Off is refused the same way.
func Open(dir string) (*Root, error) {
	if dir == Off {
		return nil, fmt.Errorf("%w: turned off", ErrUnavailable)
	}
	own, err := ownCgroup()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if dir == "" {
		dir = own
	}
	dir = filepath.Clean(dir)
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrUnavailable, dir, err)
	}
	if st.Type != unix.CGROUP2_SUPER_MAGIC {
		return nil, fmt.Errorf("%w: %s is not a cgroup v2 directory", ErrUnavailable, dir)
	}
	// moving a process (starting one in a cgroup is a move) takes write
	// access to cgroup.procs of the cgroups it leaves and joins, and of
	// the lowest one above both
	above := commonAncestor(own, dir)
	if err := unix.Access(filepath.Join(above, "cgroup.procs"), unix.W_OK); err != nil {
		return nil, fmt.Errorf("%w: cannot move processes below %s (%s is baton's cgroup): %w", ErrUnavailable, above, own, err)
	}
	owner, err := Owner(os.Getpid())
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	r := &Root{dir: dir, owner: owner, pidNS: strings.Split(owner, "-")[1]}
	probe, err := r.New("probe")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	defer os.Remove(probe)
	for _, f := range []string{"cgroup.procs", "cgroup.freeze"} {
		if err := unix.Access(filepath.Join(probe, f), unix.W_OK); err != nil {
			return nil, fmt.Errorf("%w: %s in %s: %w", ErrUnavailable, f, dir, err)
		}
	}
	if !exists(filepath.Join(probe, "cgroup.kill")) && !kernelAtLeast(5, 7) {
		return nil, fmt.Errorf("%w: this kernel cannot start a process in a cgroup (clone3 CLONE_INTO_CGROUP, Linux 5.7)", ErrUnavailable)
	}
	return r, nil
}

// Dir returns the directory the runs' cgroups are made in.
func (r *Root) Dir() string { return r.dir }

// New makes a cgroup for a run of the job named name and returns its
// directory. The caller removes it (Remove).
func (r *Root) New(name string) (string, error) {
	for range 3 {
		b := make([]byte, 4)
		_, _ = rand.Read(b)
		dir := filepath.Join(r.dir, r.owner+hex.EncodeToString(b)+"-"+cleanName(name))
		err := os.Mkdir(dir, 0o755)
		if errors.Is(err, fs.ErrExist) {
			continue // another run drew the same random part
		}
		if err != nil {
			return "", fmt.Errorf("runcgroup: %w", err)
		}
		return dir, nil
	}
	return "", fmt.Errorf("runcgroup: no free name for a cgroup of %q in %s", name, r.dir)
}

// leftoverRE matches the name of a run's cgroup: its maker's pid
// namespace, pid and start.
var leftoverRE = regexp.MustCompile(`^baton-([0-9]+)-([0-9]+)-([0-9]+)-`)

// RemoveLeftovers kills the processes of, and removes, every run's cgroup in
// the Root whose maker is no longer running: what a baton that crashed (or
// was killed with its supervisors) left behind. The cgroups of live
// processes, this one among them, are left alone. It returns what it
// removed, and an error for each cgroup it could not remove.
func (r *Root) RemoveLeftovers() ([]Leftover, error) {
	ents, err := os.ReadDir(r.dir)
	if err != nil {
		return nil, fmt.Errorf("runcgroup: %w", err)
	}
	var (
		out  []Leftover
		errs []error
	)
	for _, e := range ents {
		m := leftoverRE.FindStringSubmatch(e.Name())
		if !e.IsDir() || m == nil || strings.HasPrefix(e.Name(), r.owner) {
			continue
		}
		if m[1] != r.pidNS {
			continue // made in another pid namespace: whether its maker runs is not to be seen from here
		}
		pid, _ := strconv.Atoi(m[2])
		start, _ := strconv.ParseUint(m[3], 10, 64)
		if now, ok := startTime(pid); ok && now == start {
			continue // its maker runs
		}
		dir := filepath.Join(r.dir, e.Name())
		n := len(procs(dir))
		if err := Remove(dir, RemoveTimeout); err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, Leftover{Dir: dir, Killed: n})
	}
	return out, errors.Join(errs...)
}

// cleanName keeps name's letters, digits, '.', '_' and '-' (a job name has
// no others), at most 64 of them.
func cleanName(name string) string {
	b := []byte(name)
	for i, c := range b {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	return string(b[:min(len(b), 64)])
}

// Owner returns what the names of the runs' cgroups that process pid makes
// start with: "baton-<pid namespace>-<pid>-<start time>-". The three name
// the process for good: a pid is reused only by a process that starts
// later, and the namespace (its inode) says where the pid means it.
func Owner(pid int) (string, error) {
	ns, err := pidNamespace(pid)
	if err != nil {
		return "", err
	}
	start, ok := startTime(pid)
	if !ok {
		return "", fmt.Errorf("cannot read the start time of pid %d in /proc", pid)
	}
	return fmt.Sprintf("baton-%s-%d-%d-", ns, pid, start), nil
}

// pidNamespace returns the inode number of pid's pid namespace.
func pidNamespace(pid int) (string, error) {
	link, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/pid")
	if err != nil {
		return "", err
	}
	// pid:[4026531836]
	ino, ok := strings.CutPrefix(link, "pid:[")
	ino, ok2 := strings.CutSuffix(ino, "]")
	if !ok || !ok2 || ino == "" {
		return "", fmt.Errorf("unexpected pid namespace %q of pid %d", link, pid)
	}
	return ino, nil
}

// startTime reads pid's start time (clock ticks after boot) from
// /proc/PID/stat: with the pid, it names one process for good.
func startTime(pid int) (uint64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// pid (comm) state ppid ...: comm may hold spaces and parentheses;
	// starttime is field 22, the 20th after comm
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 20 {
		return 0, false
	}
	start, err := strconv.ParseUint(string(f[19]), 10, 64)
	return start, err == nil
}

// ownCgroup returns the directory of this process's cgroup v2: the "0::"
// line of /proc/self/cgroup on the cgroup2 mount of /proc/self/mountinfo.
func ownCgroup() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	path := ""
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			path = p
		}
	}
	if !strings.HasPrefix(path, "/") {
		return "", errors.New("this process is in no cgroup v2 (no 0:: line in /proc/self/cgroup)")
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root mountpoint options [optional...] - fstype source superoptions
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields, tail := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(tail) < 1 || tail[0] != "cgroup2" {
			continue
		}
		root, mnt := unescape(fields[3]), unescape(fields[4])
		if rel, ok := strings.CutPrefix(path, root); ok && (root == "/" || rel == "" || rel[0] == '/') {
			return filepath.Join(mnt, rel), nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", fmt.Errorf("no cgroup2 mount in /proc/self/mountinfo shows this process's cgroup %s", path)
}

// unescape undoes mountinfo's octal escapes (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// commonAncestor returns the lowest directory above (or equal to) both a
// and b, clean absolute paths.
func commonAncestor(a, b string) string {
	as, bs := strings.Split(a, "/"), strings.Split(b, "/")
	n := 0
	for n < len(as) && n < len(bs) && as[n] == bs[n] {
		n++
	}
	if n <= 1 {
		return "/"
	}
	return strings.Join(as[:n], "/")
}

// kernelAtLeast reports whether the running kernel's version is at least
// major.minor.
func kernelAtLeast(major, minor int) bool {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return false
	}
	var ma, mi int
	if n, _ := fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &ma, &mi); n != 2 {
		return false
	}
	return ma > major || ma == major && mi >= minor
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
