package soak

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/redistest"
)

// dumpGoroutines makes the replica's process write every goroutine's
// stack to its log (SIGQUIT; it exits with status 2) and returns what it
// wrote.
func (r *replica) dumpGoroutines(t *testing.T) string {
	t.Helper()
	if r.pid() == 0 {
		return ""
	}
	before, _ := os.ReadFile(r.logPath())
	r.signalAndWait(t, syscall.SIGQUIT, "write its goroutines and exit")
	after, _ := os.ReadFile(r.logPath())
	return string(after[len(before):])
}

// goroutineGroup is the goroutines of a dump that wait at the same place.
type goroutineGroup struct {
	where   string // the first frames outside the runtime and the standard library
	count   int
	longest int // minutes the longest of them has waited (the dump says it from 1 on)
}

// goroutineHead reads a goroutine's first line: "goroutine 7 [select, 12
// minutes]:", with "gp=... m=..." before the bracket since Go 1.23.
var goroutineHead = regexp.MustCompile(`^goroutine \d+(?: gp=\S+ m=\S+(?: mp=\S+)?)? \[([^,\]]+)(?:, (\d+) minutes)?(?:, [^\]]*)?\]:$`)

// goroutineGroups groups the goroutines of a Go runtime's dump by where
// they wait, most first.
func goroutineGroups(dump string) []goroutineGroup {
	byWhere := map[string]*goroutineGroup{}
	for _, block := range strings.Split(dump, "\n\n") {
		lines := strings.Split(strings.TrimSpace(block), "\n")
		m := goroutineHead.FindStringSubmatch(lines[0])
		if m == nil {
			continue
		}
		var frames, std []string
		for _, l := range lines[1:] {
			if strings.HasPrefix(l, "\t") || strings.HasPrefix(l, "created by") {
				continue
			}
			fn := l
			if i := strings.LastIndexByte(fn, '('); i > 0 {
				fn = fn[:i]
			}
			if first, _, nested := strings.Cut(fn, "/"); !nested || !strings.Contains(first, ".") {
				// the runtime's and the standard library's (no host in
				// the path): where nothing else is on the stack
				if !strings.HasPrefix(fn, "runtime.") && len(std) < 2 {
					std = append(std, fn)
				}
				continue
			}
			if frames = append(frames, fn); len(frames) == 2 {
				break
			}
		}
		if len(frames) == 0 {
			frames = std
		}
		where := m[1] + " in " + strings.Join(frames, " < ")
		g := byWhere[where]
		if g == nil {
			g = &goroutineGroup{where: where}
			byWhere[where] = g
		}
		g.count++
		if n, _ := strconv.Atoi(m[2]); n > g.longest {
			g.longest = n
		}
	}
	var out []goroutineGroup
	for _, g := range byWhere {
		out = append(out, *g)
	}
	slices.SortFunc(out, func(a, b goroutineGroup) int { return cmp.Or(b.count-a.count, strings.Compare(a.where, b.where)) })
	return out
}

// goroutineReport is the dump's largest groups, as the soak prints them.
func goroutineReport(name, dump string) string {
	gs := goroutineGroups(dump)
	total := 0
	for _, g := range gs {
		total += g.count
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n%s's goroutines at the end: %d, by where they wait (the largest groups):\n\n| goroutines | longest wait | where |\n|---|---|---|\n", name, total)
	for _, g := range gs[:min(len(gs), 15)] {
		fmt.Fprintf(&b, "| %d | %d min | %s |\n", g.count, g.longest, g.where)
	}
	return b.String()
}

// The dump's goroutines are grouped by their first frames outside the
// runtime and the standard library, with the longest wait of each group.
func TestGoroutineGroupsReadADump(t *testing.T) {
	dump := `{"level":"info","message":"x"}
SIGQUIT: quit
PC=0x0 m=0 sigcode=0

goroutine 1 [select, 12 minutes]:
github.com/batonhq/baton/internal/worker.(*engine).keep(0xc000)
	/src/internal/worker/allow.go:10 +0x1
github.com/batonhq/baton/internal/worker.(*Worker).process(0x1)
	/src/internal/worker/worker.go:20 +0x1
created by github.com/batonhq/baton/internal/worker.New in goroutine 1
	/src/internal/worker/worker.go:30 +0x1

goroutine 7 gp=0x3fa862b861e0 m=nil [select, 3 minutes]:
runtime.gopark(0x1)
	/go/src/runtime/proc.go:1 +0x1
github.com/batonhq/baton/internal/worker.(*engine).keep(0xc000)
	/src/internal/worker/allow.go:10 +0x1
github.com/batonhq/baton/internal/worker.(*Worker).process(0x1)
	/src/internal/worker/worker.go:20 +0x1

goroutine 9 [IO wait]:
internal/poll.runtime_pollWait(0x1)
	/go/src/runtime/netpoll.go:1 +0x1
net/http.(*persistConn).readLoop(0x1)
	/go/src/net/http/transport.go:1 +0x1
`
	gs := goroutineGroups(dump)
	if len(gs) != 2 || gs[0].count != 2 || gs[0].longest != 12 || !strings.Contains(gs[0].where, "(*engine).keep < ") || gs[1].count != 1 {
		t.Fatalf("groups %+v", gs)
	}
}

// keyShape is a key's pattern: what is between braces, and every run of
// digits, left out, so that the keys of every job and tick of one kind
// count together.
var keyShapeParts = regexp.MustCompile(`\{[^}]*\}|[0-9]+`)

func keyShape(k string) string {
	return keyShapeParts.ReplaceAllStringFunc(k, func(s string) string {
		if strings.HasPrefix(s, "{") {
			return "{}"
		}
		return "#"
	})
}

// keyCounts counts srv's keys by shape (a SCAN; 0 keys when it cannot
// read them).
func keyCounts(srv *redistest.Server) map[string]int {
	c := srv.Client()
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out := map[string]int{}
	var cursor uint64
	for {
		ks, next, err := c.Scan(ctx, cursor, "*", 1000).Result()
		if err != nil {
			return out
		}
		for _, k := range ks {
			out[keyShape(k)]++
		}
		if cursor = next; cursor == 0 {
			return out
		}
	}
}

// keyGrowthReport prints the key shapes of each server whose count grew
// most between before and after (by server name), largest first.
func keyGrowthReport(names []string, before, after []map[string]int) string {
	var b strings.Builder
	b.WriteString("\nkeys by shape at a third of the load and at its end, those that grew most:\n\n| server | shape | before | after |\n|---|---|---|---|\n")
	for i, name := range names {
		type d struct {
			shape         string
			before, after int
		}
		var ds []d
		for shape, n := range after[i] {
			if n > before[i][shape] {
				ds = append(ds, d{shape, before[i][shape], n})
			}
		}
		slices.SortFunc(ds, func(x, y d) int {
			return cmp.Or((y.after-y.before)-(x.after-x.before), strings.Compare(x.shape, y.shape))
		})
		for _, x := range ds[:min(len(ds), 5)] {
			fmt.Fprintf(&b, "| %s | `%s` | %d | %d |\n", name, x.shape, x.before, x.after)
		}
	}
	return b.String()
}

// Key shapes count the keys of every job and tick of one kind together.
func TestKeyShapeLeavesOutNamesAndNumbers(t *testing.T) {
	for k, want := range map[string]string{
		"soak:{@sched-17}:fence":               "soak:{}:fence",
		"soak:{list-3}:tick:1796309105000":     "soak:{}:tick:#",
		"soak:lock:{fence:@sched-17}:fence":    "soak:lock:{}:fence",
		"asynq:{soak:default}:t:list-3@2026-1": "asynq:{}:t:list-#@#-#",
	} {
		if got := keyShape(k); got != want {
			t.Errorf("keyShape(%q) = %q, want %q", k, got, want)
		}
	}
}

// memoryStatsFields are the parts of a Redis's used_memory that
// memoryStatsReport shows (MEMORY STATS).
var memoryStatsFields = []string{"total.allocated", "dataset.bytes", "keys.count", "overhead.total", "clients.normal", "functions.caches"}

// memoryStats reads srv's MEMORY STATS (the integer fields; none when it
// cannot).
func memoryStats(srv *redistest.Server) map[string]int64 {
	c := srv.Client()
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out := map[string]int64{}
	v, err := c.Do(ctx, "MEMORY", "STATS").Result()
	if err != nil {
		return out
	}
	var kv []any
	switch v := v.(type) {
	case []any:
		kv = v
	case map[any]any:
		for k, x := range v {
			kv = append(kv, k, x)
		}
	}
	for i := 0; i+1 < len(kv); i += 2 {
		k, _ := kv[i].(string)
		if n, ok := kv[i+1].(int64); ok {
			out[k] = n
		}
	}
	return out
}

// memoryStatsReport prints what each server's used_memory is made of at
// both ends: what a growth of used_memory is.
func memoryStatsReport(names []string, before, after []map[string]int64) string {
	var b strings.Builder
	b.WriteString("\nMEMORY STATS at a third of the load and at its end:\n\n| server | field | before | after |\n|---|---|---|---|\n")
	for i, name := range names {
		if i >= len(before) || i >= len(after) {
			break
		}
		for _, f := range memoryStatsFields {
			fmt.Fprintf(&b, "| %s | %s | %d | %d |\n", name, f, before[i][f], after[i][f])
		}
	}
	return b.String()
}
