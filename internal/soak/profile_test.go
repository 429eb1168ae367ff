package soak

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// profileTag builds the replicas' binary with the test-only profile
// listener (cmd/baton/profile.go): net/http/pprof and /debug/freeosmemory
// on BATON_PROFILE_ADDR, which replica.start sets to the replica's prof.
const profileTag = "batonprofile"

// vmRSS is process pid's resident set in bytes (/proc/PID/status), 0 when
// it cannot be read.
func vmRSS(pid int) int64 { return procStatus(pid)["VmRSS:"] }

// procStatus reads process pid's memory lines of /proc/PID/status (VmRSS,
// RssAnon: what the process wrote, RssFile: pages of mapped files such as
// its binary, which are clean and shared, RssShmem), in bytes by field
// name with its colon; empty when it cannot be read.
func procStatus(pid int) map[string]int64 {
	out := map[string]int64{}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return out
	}
	for l := range strings.Lines(string(b)) {
		if f := strings.Fields(l); len(f) >= 3 && f[2] == "kB" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			out[f[0]] = kb << 10
		}
	}
	return out
}

// freeOSMemory asks the replica whose profiles are served at addr to
// collect its garbage and return its free pages to the OS, and reports
// whether it did.
func freeOSMemory(addr string) bool {
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + addr + "/debug/freeosmemory")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	return resp.StatusCode == http.StatusNoContent
}

// heapProfiles keeps heap profiles of replicas taken at the two ends of the
// compared windows, to tell what a live heap that grew holds more of.
type heapProfiles struct {
	dir   string
	reps  []*replica
	files map[string][]string // replica name -> profile files in order taken
}

func newHeapProfiles(dir string, reps []*replica) *heapProfiles {
	return &heapProfiles{dir: dir, reps: reps, files: map[string][]string{}}
}

// take saves each replica's heap profile (after a GC: live objects only)
// as NAME-heap-LABEL.pb.gz; a replica it cannot read is logged.
func (h *heapProfiles) take(t *testing.T, label string) {
	c := http.Client{Timeout: 30 * time.Second}
	for _, r := range h.reps {
		path := filepath.Join(h.dir, r.name+"-heap-"+label+".pb.gz")
		resp, err := c.Get("http://" + r.prof + "/debug/pprof/heap?gc=1")
		if err != nil {
			t.Logf("soak: heap profile of %s (%s): %v", r.name, label, err)
			continue
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("%s", resp.Status)
		}
		if err == nil {
			err = os.WriteFile(path, b, 0o644)
		}
		if err != nil {
			t.Logf("soak: heap profile of %s (%s): %v", r.name, label, err)
			continue
		}
		h.files[r.name] = append(h.files[r.name], path)
	}
}

// report is, for each replica with two profiles, the functions whose live
// bytes changed most between them (go tool pprof -top -diff_base), and
// copies the profiles to BATON_SOAK_PROFILES when it names a directory.
func (h *heapProfiles) report(t *testing.T, bin string) string {
	var b strings.Builder
	keep := os.Getenv("BATON_SOAK_PROFILES")
	for _, r := range h.reps {
		fs := h.files[r.name]
		if keep != "" {
			for _, f := range fs {
				if data, err := os.ReadFile(f); err == nil {
					_ = os.WriteFile(filepath.Join(keep, filepath.Base(f)), data, 0o644)
				}
			}
		}
		if len(fs) < 2 {
			continue
		}
		out, err := exec.Command(goCommand(), "tool", "pprof", "-top", "-nodecount=25", "-sample_index=inuse_space",
			"-diff_base="+fs[0], bin, fs[len(fs)-1]).CombinedOutput()
		if err != nil {
			t.Logf("soak: go tool pprof for %s: %v\n%s", r.name, err, out)
			continue
		}
		fmt.Fprintf(&b, "soak: %s's live heap, end less start (go tool pprof -top -diff_base):\n", r.name)
		for l := range strings.Lines(string(out)) {
			b.WriteString("soak:   " + l)
		}
	}
	return b.String()
}

// goCommand is the go command go test put first on $PATH.
func goCommand() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(os.Getenv("GOROOT"), "bin", "go")
}
