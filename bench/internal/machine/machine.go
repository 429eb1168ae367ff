// Package machine describes what a benchmark's numbers depend on: the CPU,
// cores, Go and redis-server versions, the libraries compared, the date and
// the command that reproduces the run.
package machine

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/batonhq/baton/internal/redistest"
)

// Describe returns one line per fact. redisNote says how the benchmark runs
// its redis-servers; libs are the module paths whose versions matter;
// command is the benchmark's own command line, args its flags.
func Describe(began time.Time, redisNote string, libs []string, command string, args []string) []string {
	cpu := "unknown"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		if m := regexp.MustCompile(`(?m)^model name\s*:\s*(.+)$`).FindSubmatch(b); m != nil {
			cpu = strings.TrimSpace(string(m[1]))
		}
	}
	redisVer := "unknown"
	if bin, err := redistest.Binary(); err == nil {
		if out, err := exec.Command(bin, "--version").Output(); err == nil {
			redisVer = strings.TrimSpace(string(out))
			if m := regexp.MustCompile(`v=(\S+)`).FindStringSubmatch(redisVer); m != nil {
				redisVer = m[1]
			}
		}
	}
	var versions []string
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if !slices.Contains(libs, d.Path) {
				continue
			}
			v := d.Version
			if d.Replace != nil {
				v = "local " + d.Replace.Path
			}
			versions = append(versions, d.Path+" "+v)
		}
	}
	if len(args) > 0 {
		command += " " + strings.Join(args, " ")
	}
	return []string{
		"CPU: " + cpu,
		fmt.Sprintf("cores: %d (GOMAXPROCS %d), %s/%s", runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH),
		"Go: " + runtime.Version(),
		"redis-server: " + redisVer + " (" + redisNote + ")",
		"libraries: " + strings.Join(versions, ", "),
		"date: " + began.UTC().Format(time.RFC3339),
		"command: `" + command + "`",
	}
}
