package quorum

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
)

func newTestGroup(t *testing.T) (*Group, *redis.Client) {
	t.Helper()
	s := redistest.New(t)
	rdb := s.TestClient(t)
	g, err := New([]redis.UniversalClient{rdb}, Options{Marker: "m", Quarantine: time.Minute, Fresh: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	if err := g.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	return g, rdb
}

// scriptCalls is how many EVALSHA and EVAL calls the server has run.
func scriptCalls(t *testing.T, rdb *redis.Client) int64 {
	t.Helper()
	return commandCalls(t, rdb, "evalsha") + commandCalls(t, rdb, "eval")
}

// The items of a pipeline are sent as one script call per chunk of
// manyChunk, not one per item, and each item still gets its own answer.
func TestPipelineSendsOneScriptCallPerChunk(t *testing.T) {
	g, rdb := newTestGroup(t)
	ctx := context.Background()
	s := NewScript(`redis.call('SET', KEYS[1], ARGV[1]) return tonumber(ARGV[1]) * 2`)
	const n = 2*manyChunk + 5
	before := scriptCalls(t, rdb)
	replies := g.Pipeline(ctx, 5*time.Second, s, n, func(i int) ([]string, []any) {
		return []string{fmt.Sprintf("k%d", i)}, []any{i}
	})
	calls := scriptCalls(t, rdb) - before
	// NOSCRIPT at first sight costs each chunk one more call (EVAL)
	if calls < 3 || calls > 6 {
		t.Fatalf("%d items took %d script calls; want 3 chunks (and their EVAL after NOSCRIPT)", n, calls)
	}
	for i, r := range replies[0] {
		if r.Err != nil || r.Val != int64(2*i) {
			t.Fatalf("item %d answered %v, %v; want %d", i, r.Val, r.Err, 2*i)
		}
		if v, _ := rdb.Get(ctx, fmt.Sprintf("k%d", i)).Result(); v != fmt.Sprint(i) {
			t.Fatalf("item %d wrote %q", i, v)
		}
	}
	before = scriptCalls(t, rdb)
	g.Pipeline(ctx, 5*time.Second, s, n, func(i int) ([]string, []any) {
		return []string{fmt.Sprintf("k%d", i)}, []any{i}
	})
	if calls := scriptCalls(t, rdb) - before; calls != 3 {
		t.Fatalf("%d items of a known script took %d script calls; want 3", n, calls)
	}
}

// A call of a chunk answers exactly what it would have answered alone: its
// error reply, a raised error (the calls after it still run), nil, a
// status, a corrupt counter named by its own key.
func TestChunkedCallAnswersAsAlone(t *testing.T) {
	g, rdb := newTestGroup(t)
	ctx := context.Background()
	if err := rdb.LPush(ctx, "alist", "x").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, "bad", "not-a-number", 0).Err(); err != nil {
		t.Fatal(err)
	}
	s := NewGuardedScript(`
if ARGV[1] == 'err' then return redis.error_reply('NOPE ' .. KEYS[1]) end
if ARGV[1] == 'raise' then return redis.call('GET', KEYS[1]) end
if ARGV[1] == 'nil' then return nil end
if ARGV[1] == 'status' then return redis.status_reply('FINE') end
if ARGV[1] == 'count' then
  local n, corrupt = q_count(1)
  if corrupt then return corrupt end
  return n
end
redis.call('SET', KEYS[1], 'written')
return {1, #KEYS, #ARGV}
`)
	type item struct {
		key, arg string
	}
	items := []item{{"a", "write"}, {"b", "err"}, {"alist", "raise"}, {"c", "write"}, {"d", "nil"}, {"e", "status"}, {"bad", "count"}, {"f", "write"}}
	replies := g.Pipeline(ctx, 5*time.Second, s, len(items), func(i int) ([]string, []any) {
		return []string{items[i].key}, []any{items[i].arg}
	})[0]
	if err := s.Load(ctx, rdb).Err(); err != nil {
		t.Fatal(err)
	}
	for i, it := range items {
		alone := rdb.EvalSha(ctx, s.Hash(), []string{it.key}, it.arg)
		r := replies[i]
		switch it.arg {
		case "write":
			if fmt.Sprint(r.Val) != "[1 1 1]" || r.Err != nil {
				t.Errorf("item %d (%s) = %v, %v; want [1 1 1]", i, it.arg, r.Val, r.Err)
			}
		case "count":
			var ce *CorruptError
			if !errors.As(r.Err, &ce) || ce.Key != "bad" {
				t.Errorf("item %d (%s) = %v, %v; want a CorruptError naming key bad", i, it.arg, r.Val, r.Err)
			}
		case "raise":
		default:
			if fmt.Sprint(r.Val) != fmt.Sprint(alone.Val()) || fmt.Sprint(r.Err) != fmt.Sprint(alone.Err()) {
				t.Errorf("item %d (%s) = %v, %v; alone it is %v, %v", i, it.arg, r.Val, r.Err, alone.Val(), alone.Err())
			}
		}
		if it.arg == "err" && (r.Err == nil || r.Err.Error() != "NOPE b") {
			t.Errorf("item %d error = %v; want NOPE b", i, r.Err)
		}
		if it.arg == "raise" && (r.Err == nil || !redis.HasErrorPrefix(r.Err, "WRONGTYPE")) {
			t.Errorf("item %d error = %v; want WRONGTYPE", i, r.Err)
		}
		if it.arg == "nil" && !errors.Is(r.Err, redis.Nil) {
			t.Errorf("item %d error = %v; want redis.Nil", i, r.Err)
		}
	}
	for _, k := range []string{"a", "c", "f"} {
		if v, _ := rdb.Get(ctx, k).Result(); v != "written" {
			t.Errorf("key %s = %q: a call after a failed one did not run", k, v)
		}
	}
}

// A master runs one caller's calls in the order they were made also when
// the server does not know the script of an early call (the first call of
// it since a restart or SCRIPT FLUSH) but knows a later one's: the early
// call answered NOSCRIPT must not be sent again after the later one ran,
// or a release submitted after its acquire runs first and leaves the key
// taken.
func TestBatchKeepsCallOrderWhenTheServerLacksAScript(t *testing.T) {
	g, rdb := newTestGroup(t)
	ctx := context.Background()
	b := g.masters[0].batch
	const key, tok = "lock-x", "token-x"
	acquire := NewScript(`return redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', 60000) and 1 or 0`)
	release := NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)
	// the server knows the release, not the acquire
	if err := release.Load(ctx, rdb).Err(); err != nil {
		t.Fatal(err)
	}
	b.mu.Lock()
	b.busy = maxPipelines // as if pipelines were under way: calls queue
	b.mu.Unlock()
	parseInt := func(cmd *redis.Cmd) (any, error) { return cmd.Int64() }
	newFan := func() *fan {
		_, cancel := context.WithCancel(ctx)
		f := &fan{parse: parseInt, ch: make(chan Reply, 1), cancel: cancel}
		f.left.Store(1)
		return f
	}
	otherAcquired, acquired, released := newFan(), newFan(), newFan()
	b.submit(ctx, acquire, acquire.Line([]string{"lock-other"}, "token-other"), otherAcquired)
	b.submit(ctx, acquire, acquire.Line([]string{key}, tok), acquired)
	b.submit(ctx, release, release.Line([]string{key}, tok), released)
	b.work(b.next(nil))
	if r := <-acquired.ch; r.Err != nil || r.Val != int64(1) {
		t.Fatalf("acquire = %v, %v; want 1", r.Val, r.Err)
	}
	r := <-released.ch
	if v, _ := rdb.Get(ctx, key).Result(); v != "" || r.Err != nil || r.Val != int64(1) {
		t.Fatalf("release = %v, %v and the lock key holds %q: the release overtook the acquire re-sent after NOSCRIPT", r.Val, r.Err, v)
	}
	<-otherAcquired.ch
	b.mu.Lock()
	b.busy -= maxPipelines - 1
	b.mu.Unlock()
}

// commandCalls is how many calls of command name the server has run.
func commandCalls(t *testing.T, rdb *redis.Client, name string) int64 {
	t.Helper()
	return int64(redistest.CommandCalls(t, rdb)[name])
}

// The first pipeline of a script the master has not been sent (a replica's
// first big instant) sends it whole once, in its first line: the server
// caches it before it runs the lines behind, which go by hash. Lines whose
// script answers an error of its own (a claim held elsewhere) teach it too.
func TestFirstPipelineSendsAScriptWholeOnce(t *testing.T) {
	g, rdb := newTestGroup(t)
	ctx := context.Background()
	m := g.masters[0]
	s := NewScript(`if ARGV[1] == '0' then return redis.error_reply('BUSY 5') end redis.call('SET', KEYS[1], ARGV[1]) return 1`)
	const n = 50
	scripts := make([]*Script, n)
	lines := make([][]any, n)
	for i := range n {
		scripts[i], lines[i] = s, s.Line([]string{fmt.Sprintf("k%d", i)}, i)
	}
	evals, shas := commandCalls(t, rdb, "eval"), commandCalls(t, rdb, "evalsha")
	cmds := m.runLines(ctx, scripts, lines, false)
	for i, c := range cmds {
		if i == 0 {
			if err := c.Err(); err == nil || !strings.HasPrefix(err.Error(), "BUSY") {
				t.Fatalf("line 0: %v, want its BUSY", err)
			}
			continue
		}
		if v, err := c.Int64(); err != nil || v != 1 {
			t.Fatalf("line %d: %v, %v", i, v, err)
		}
	}
	if e, h := commandCalls(t, rdb, "eval")-evals, commandCalls(t, rdb, "evalsha")-shas; e != 1 || h != n-1 {
		t.Fatalf("%d lines: %d EVAL and %d EVALSHA, want 1 and %d", n, e, h, n-1)
	}
	// the script is known now: the next pipeline goes by hash alone
	evals = commandCalls(t, rdb, "eval")
	m.runLines(ctx, scripts, lines, false)
	if e := commandCalls(t, rdb, "eval") - evals; e != 0 {
		t.Fatalf("second pipeline: %d EVAL", e)
	}
}

// Schedule: a master busy with another client's long script (or loading
// its data after a restart) answers a pipeline's first line, sent whole
// as the master does not know its script, with -BUSY (-LOADING): the
// server refused the call before it cached the script. The master must
// not note the script known: the next pipeline, by hash alone, would get
// NOSCRIPT for its first line and send it again after the lines behind it
// ran, out of order (here: the line behind reads the key the first line
// writes).
func TestBusyServerDoesNotTeachAScript(t *testing.T) {
	g, rdb := newTestGroup(t)
	ctx := context.Background()
	m := g.masters[0]
	if err := rdb.ConfigSet(ctx, "busy-reply-threshold", "50").Err(); err != nil {
		t.Fatal(err)
	}
	get := NewScript(`return redis.call('GET', KEYS[1])`)
	if c := m.runLines(ctx, []*Script{get}, [][]any{get.Line([]string{"k"})}, false); c[0].Err() != redis.Nil {
		t.Fatalf("teaching the reader: %v", c[0].Err())
	}
	set := NewScript(`redis.call('SET', KEYS[1], ARGV[1]) return 1`)
	other := redis.NewClient(&redis.Options{Addr: rdb.Options().Addr, ReadTimeout: 10 * time.Second})
	defer other.Close()
	busy := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		close(busy)
		done <- other.Eval(ctx, `local t0 = redis.call('TIME') local s0 = t0[1]*1000000 + t0[2]
while true do local t = redis.call('TIME') if t[1]*1000000 + t[2] - s0 > 1500000 then break end end return 1`, nil).Err()
	}()
	<-busy
	// the server is busy once a PING answers BUSY
	probe := redis.NewClient(&redis.Options{Addr: rdb.Options().Addr})
	defer probe.Close()
	poll.Require(t, 10*time.Second, "the long script to make the server busy", func() bool {
		err := probe.Ping(ctx).Err()
		return err != nil && strings.HasPrefix(err.Error(), "BUSY")
	})
	c := m.runLines(ctx, []*Script{set}, [][]any{set.Line([]string{"k"}, "v")}, false)
	if err := c[0].Err(); err == nil || !strings.HasPrefix(err.Error(), "BUSY") {
		t.Fatalf("while busy: %v, want the server's BUSY", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if m.knows(set) {
		t.Fatal("the master notes a script known that the server refused (BUSY) before caching it")
	}
	cmds := m.runLines(ctx, []*Script{set, get}, [][]any{set.Line([]string{"k"}, "v"), get.Line([]string{"k"})}, false)
	if v, err := cmds[1].Text(); err != nil || v != "v" {
		t.Fatalf("the line behind the write read %q, %v: the write ran after it", v, err)
	}
}

// The calls of a chunk read the server's TIME and the master's marker once
// for the chunk, not once per call, and all see the same moment and guard.
func TestChunkReadsTimeAndMarkerOnce(t *testing.T) {
	g, rdb := newTestGroup(t)
	ctx := context.Background()
	s := NewGuardedScript(`local t = q_time()
local floor = q_guard(KEYS[2])
if not floor then return -1 end
redis.call('SET', KEYS[1], t[1] .. '.' .. t[2])
return t[1] .. '.' .. t[2]`)
	const n = 50
	keys := func(i int) ([]string, []any) { return []string{fmt.Sprintf("k%d", i), g.MarkerKey()}, nil }
	g.Pipeline(ctx, 5*time.Second, s, n, keys) // the server learns the script
	times, gets := commandCalls(t, rdb, "time"), commandCalls(t, rdb, "get")
	replies := g.Pipeline(ctx, 5*time.Second, s, n, keys)
	if d := commandCalls(t, rdb, "time") - times; d != 1 {
		t.Errorf("a chunk of %d calls ran TIME %d times, want 1", n, d)
	}
	if d := commandCalls(t, rdb, "get") - gets; d != 1 {
		t.Errorf("a chunk of %d calls read the marker %d times, want 1", n, d)
	}
	for i, r := range replies[0] {
		if r.Err != nil || r.Val != replies[0][0].Val {
			t.Fatalf("call %d answered %v, %v; want the chunk's one moment %v", i, r.Val, r.Err, replies[0][0].Val)
		}
	}
	// alone, a call reads both itself
	times = commandCalls(t, rdb, "time")
	if err := s.Run(ctx, rdb, []string{"alone", g.MarkerKey()}).Err(); err != nil {
		t.Fatal(err)
	}
	if d := commandCalls(t, rdb, "time") - times; d != 1 {
		t.Errorf("a call alone ran TIME %d times, want 1", d)
	}
}
