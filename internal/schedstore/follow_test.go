package schedstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/handoff"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
)

const testKey = "0123456789abcdef0123456789abcdef-test-key"

func testConfig(t *testing.T, extra string) *config.Config {
	t.Helper()
	cfg, err := config.Load([]byte("redis: {url: \"redis://127.0.0.1:1/0\"}\nnamespace: fs\n" + extra))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// applied records what a Follower applies.
type applied struct {
	mu   sync.Mutex
	jobs map[string]*config.Job
	puts int
}

func (a *applied) apply(put []Change, removed []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, c := range put {
		a.jobs[c.Job.Name] = c.Job
		a.puts++
	}
	for _, n := range removed {
		delete(a.jobs, n)
	}
}

func (a *applied) names() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for n := range a.jobs {
		out = append(out, n)
	}
	return out
}

func (a *applied) has(name string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.jobs[name] != nil
}

// following runs a Follower of cfg's schedules on rdb until the test ends.
func following(t *testing.T, rdb *redis.Client, cfg *config.Config) (*Store, *Follower, *applied) {
	t.Helper()
	return followingStore(t, Of(rdb, cfg), cfg)
}

// followingStore is following of st, with opts.
func followingStore(t *testing.T, st *Store, cfg *config.Config, opts ...FollowerOption) (*Store, *Follower, *applied) {
	t.Helper()
	a := &applied{jobs: map[string]*config.Job{}}
	f := NewFollower(st, cfg, a.apply, opts...)
	if err := f.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return st, f, a
}

func put(t *testing.T, st *Store, id, doc string) Record {
	t.Helper()
	d, err := config.ScheduleDocument([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	r, err := st.Put(context.Background(), id, d, Any)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A put and a delete reach a running follower by the change stream, long
// before a resync would.
func TestFollowerSeesPutsAndDeletesAsTheyAreMade(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	cfg := testConfig(t, "")
	writer := New(rdb, cfg.Namespace, nil, 1)
	put(t, writer, "before", `{schedule: "@hourly", handler: {name: h}}`)
	_, f, a := following(t, rdb, cfg)
	if !a.has("@before") {
		t.Fatalf("sync: applied %v", a.names())
	}
	began := time.Now()
	put(t, writer, "report/tenant-42", `{schedule: "0 9 * * 1", timezone: Europe/Berlin, handler: {name: report, payload: {tenant: 42}}}`)
	poll.Require(t, 5*time.Second, "the put applied", func() bool { return a.has("@report/tenant-42") })
	if took := time.Since(began); took > 4*time.Second {
		t.Errorf("the put took %v to apply", took)
	}
	j, ok := f.ScheduleJob("@report/tenant-42")
	if !ok || string(j.Handler.Payload) != `{"tenant":42}` || j.Location.String() != "Europe/Berlin" {
		t.Fatalf("job %+v %v", j, ok)
	}
	if _, err := writer.Delete(context.Background(), "before"); err != nil {
		t.Fatal(err)
	}
	poll.Require(t, 5*time.Second, "the delete applied", func() bool { return !a.has("@before") })
	if _, ok := f.ScheduleJob("@before"); ok {
		t.Fatal("a deleted schedule is still a job")
	}
}

// Changes trimmed from the stream before the follower read them (it fell
// behind) are found by a full read.
func TestFollowerReadsEverythingAfterAGapInTheChanges(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	cfg := testConfig(t, "")
	writer := New(rdb, cfg.Namespace, nil, 1)
	ctx := context.Background()
	st := New(rdb, cfg.Namespace, nil, 1)
	a := &applied{jobs: map[string]*config.Job{}}
	f := NewFollower(st, cfg, a.apply)
	if err := f.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		put(t, writer, fmt.Sprintf("s%d", i), `{schedule: "@hourly", handler: {name: h}}`)
	}
	// the first two changes are trimmed away before the follower reads
	if err := rdb.XTrimMaxLen(ctx, newKeys("fs", 0, 1).log, 1).Err(); err != nil {
		t.Fatal(err)
	}
	gap, back, err := f.follow(ctx, 0, time.Now())
	if err != nil || !gap || back {
		t.Fatalf("follow: gap %v, back %v, err %v", gap, back, err)
	}
	if err := f.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if len(a.names()) != 3 || f.Version("x") != 3 {
		t.Fatalf("after the full read: %v, version %d", a.names(), f.Version("x"))
	}
}

// A Redis that restarted empty (its change count starts over) and had a
// schedule put since is read again in full: the schedules it lost are put
// back from the copy, the new one stands beside them.
func TestFollowerReadsEverythingWhenTheChangeCountStartsOver(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	cfg := testConfig(t, "")
	writer := New(rdb, cfg.Namespace, nil, 1)
	for i := range 3 {
		put(t, writer, fmt.Sprintf("old%d", i), `{schedule: "@hourly", handler: {name: h}}`)
	}
	_, _, a := following(t, rdb, cfg)
	if err := rdb.FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	put(t, writer, "new", `{schedule: "@hourly", handler: {name: h}}`)
	poll.Require(t, 10*time.Second, "the lost schedules put back beside the new one", func() bool {
		n, _ := writer.Count(context.Background())
		return n == 4 && len(a.names()) == 4 && a.has("@new") && a.has("@old0")
	})
}

// With signing keys, a definition written to Redis without the key is
// refused and reported, never run; one moved to another id is refused too.
func TestFollowerRefusesADefinitionNotSignedWithTheKey(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	cfg := testConfig(t, "security: {signing_keys: [\""+testKey+"\"]}\n")
	signedStore := New(rdb, cfg.Namespace, handoff.NewSigner(cfg.Security), 1)
	unsigned := New(rdb, cfg.Namespace, nil, 1)
	put(t, signedStore, "good", `{schedule: "@hourly", handler: {name: h}}`)
	_, f, a := following(t, rdb, cfg)
	put(t, unsigned, "forged", `{schedule: "@hourly", handler: {name: h}}`)
	// a signed definition copied to another id
	ctx := context.Background()
	k := newKeys("fs", 0, 1)
	good, _ := rdb.HGet(ctx, k.defs, "good").Result()
	if err := rdb.HSet(ctx, k.defs, "moved", good).Err(); err != nil {
		t.Fatal(err)
	}
	put(t, unsigned, "nudge", `{schedule: "@hourly", handler: {name: h}}`) // a change for the follower to read
	rdb.XAdd(ctx, &redis.XAddArgs{Stream: k.log, Values: []any{"ver", "0", "id", "moved", "op", "put"}})
	poll.Require(t, 10*time.Second, "the forged and moved definitions refused", func() bool {
		return len(f.Refused()) >= 3
	})
	if a.has("@forged") || a.has("@moved") || a.has("@nudge") || !a.has("@good") {
		t.Fatalf("applied %v", a.names())
	}
	for _, r := range f.Refused() {
		switch r.ID {
		case "forged", "nudge":
			if !errors.Is(r.Err, handoff.ErrUnsigned) {
				t.Errorf("%s: %v", r.ID, r.Err)
			}
		case "moved": // signed under another id
			if !errors.Is(r.Err, handoff.ErrBadSignature) {
				t.Errorf("%s: %v", r.ID, r.Err)
			}
		}
	}
}

// A value that is not a record is reported with the key and the id.
func TestStoreNamesACorruptRecord(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	st := New(rdb, "fs", nil, 1)
	ctx := context.Background()
	rdb.HSet(ctx, newKeys("fs", 0, 1).defs, "bad", "garbage")
	_, err := st.Get(ctx, "bad")
	var ce *CorruptError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "fs:{schedules}:defs") {
		t.Fatalf("got %v", err)
	}
}

// A record holds its definition as it was put, with no copy of its id
// (a million records would keep a million ids twice); a record of the
// earlier form, which wrapped the definition with its id, still reads, and
// one of another id is still refused.
func TestRecordHoldsTheDefinitionAlone(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	ctx := context.Background()
	doc := `{"handler":{"name":"h"},"schedule":"@hourly"}`
	defs := newKeys("fs", 0, 1).defs
	for _, sign := range []*handoff.Signer{nil, handoff.NewSigner(config.SecurityConfig{SigningKeys: []string{testKey}})} {
		st := New(rdb, "fs", sign, 1)
		if _, err := st.Put(ctx, "x", json.RawMessage(doc), Any); err != nil {
			t.Fatal(err)
		}
		v := rdb.HGet(ctx, defs, "x").Val()
		want := "|" + doc
		if sign.Enabled() {
			want = "|" + doc[:len(doc)-1] + `,"sig":"`
		}
		if !strings.Contains(v, want) || strings.Contains(v, `"id"`) {
			t.Errorf("signed %v: stored %q, want the definition as put", sign.Enabled(), v)
		}
		// the earlier form, as a store of before wrote it
		wrapped := []byte(`{"id":"old","doc":` + doc + `}`)
		if sign.Enabled() {
			wrapped = sign.Sign(st.domain(), wrapped)
		}
		rdb.HSet(ctx, defs, "old", "1|1|1|"+string(wrapped))
		rdb.HSet(ctx, defs, "other", "1|1|1|"+string(wrapped))
		if r, err := st.Get(ctx, "old"); err != nil || string(r.Doc) != doc {
			t.Errorf("signed %v: the earlier form reads %s, %v", sign.Enabled(), r.Doc, err)
		}
		if _, err := st.Get(ctx, "other"); err == nil || !strings.Contains(err.Error(), `schedule "old"'s`) {
			t.Errorf("signed %v: the earlier form under another id: %v", sign.Enabled(), err)
		}
	}
}

// A record's head keeps when the schedule was first put and when this
// definition was, as the ms between them (a record costs a million times
// its bytes): a put over a record of the earlier head (both in unix ms)
// keeps its created, and a put made after Redis's clock went back before
// created keeps its own time.
func TestRecordHeadKeepsCreatedAndUpdated(t *testing.T) {
	clk := redistest.NewTestClock(t)
	rdb := redistest.New(t, redistest.WithClock(clk)).TestClient(t)
	st := New(rdb, "fs", nil, 1)
	ctx := context.Background()
	doc := json.RawMessage(`{"handler":{"name":"h"},"schedule":"@hourly"}`)
	daily := json.RawMessage(`{"handler":{"name":"h"},"schedule":"@daily"}`) // a put of the same changes nothing
	defs := newKeys("fs", 0, 1).defs
	same := func(what string, put Record) {
		t.Helper()
		got, err := st.Get(ctx, put.ID)
		if err != nil || !got.Created.Equal(put.Created) || !got.Updated.Equal(put.Updated) || got.Version != put.Version {
			t.Errorf("%s: put %v %v v%d, read %v %v v%d (%v; stored %q)", what, put.Created, put.Updated, put.Version,
				got.Created, got.Updated, got.Version, err, rdb.HGet(ctx, defs, put.ID).Val())
		}
	}
	first, err := st.Put(ctx, "x", doc, Any)
	if err != nil {
		t.Fatal(err)
	}
	same("first put", first)
	if err := clk.Step(90 * time.Second); err != nil {
		t.Fatal(err)
	}
	again, err := st.Put(ctx, "x", daily, Any)
	if err != nil || !again.Created.Equal(first.Created) || again.Updated.Sub(first.Created) < 90*time.Second {
		t.Fatalf("second put: %+v, %v", again, err)
	}
	same("second put", again)
	if v := rdb.HGet(ctx, defs, "x").Val(); !strings.HasPrefix(v, strconv.FormatInt(first.Created.UnixMilli(), 10)+"|+9") {
		t.Errorf("stored head %q, want created and + the ms since", v[:strings.LastIndex(v[:40], "|")])
	}
	// a record of the earlier head
	rdb.HSet(ctx, defs, "old", "1700000000000|1700000005000|3|"+string(doc))
	if r, err := st.Get(ctx, "old"); err != nil || r.Created.UnixMilli() != 1700000000000 || r.Updated.UnixMilli() != 1700000005000 {
		t.Errorf("the earlier head reads %+v, %v", r, err)
	}
	over, err := st.Put(ctx, "old", daily, Any)
	if err != nil || over.Created.UnixMilli() != 1700000000000 {
		t.Fatalf("a put over the earlier head: %+v, %v", over, err)
	}
	same("put over the earlier head", over)
	// Redis's clock goes back before the record was created
	if err := clk.Step(-time.Hour); err != nil {
		t.Fatal(err)
	}
	back, err := st.Put(ctx, "x", doc, Any)
	if err != nil || !back.Updated.Before(back.Created) {
		t.Fatalf("a put after the clock went back: %+v, %v", back, err)
	}
	same("put after the clock went back", back)
}

// A put conditioned on a version fails once another put changed it.
func TestPutIfVersionLosesNoOtherWritersChange(t *testing.T) {
	srv := redistest.New(t)
	st := New(srv.TestClient(t), "fs", nil, 1)
	ctx := context.Background()
	doc := json.RawMessage(`{"schedule":"@hourly","handler":{"name":"h"}}`)
	r1, err := st.Put(ctx, "x", doc, Match{Version: 0})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(ctx, "x", doc, Match{Version: 0}); !errors.Is(err, ErrChanged) {
		t.Fatalf("create of an existing id: %v", err)
	}
	daily := json.RawMessage(`{"schedule":"@daily","handler":{"name":"h"}}`)
	r2, err := st.Put(ctx, "x", daily, Match{Version: r1.Version})
	if err != nil || !r2.Created.Equal(r1.Created) || r2.Version != r1.Version+1 {
		t.Fatalf("%+v %v", r2, err)
	}
	if _, err := st.Put(ctx, "x", daily, Match{Version: r1.Version}); !errors.Is(err, ErrChanged) {
		t.Fatalf("stale version: %v", err)
	}
}

// A schedule's version counts its own changes: 1 when first put, whatever
// the other schedules of its shard did, one more with each change; a
// schedule deleted and put again starts at 1 again, and a put that
// expected the deleted one (its version and created) fails.
func TestScheduleVersionCountsItsOwnChanges(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	st := New(rdb, "fs", nil, 1)
	ctx := context.Background()
	doc := func(s string) json.RawMessage {
		return json.RawMessage(`{"schedule":"` + s + `","handler":{"name":"h"}}`)
	}
	for i := range 5 {
		if _, err := st.Put(ctx, fmt.Sprintf("t-%d", i), doc("@hourly"), Any); err != nil {
			t.Fatal(err)
		}
	}
	first, err := st.Put(ctx, "t-44", doc("@hourly"), Any)
	if err != nil || first.Version != 1 || first.Change != 6 {
		t.Fatalf("first put after 5 others: version %d change %d (%v), want 1 and 6", first.Version, first.Change, err)
	}
	second, err := st.Put(ctx, "t-44", doc("@daily"), Any)
	if err != nil || second.Version != 2 {
		t.Fatalf("second put: version %d (%v), want 2", second.Version, err)
	}
	if got, err := st.Get(ctx, "t-44"); err != nil || got.Version != 2 || got.Change != second.Change {
		t.Fatalf("read back: %+v %v", got, err)
	}
	if _, err := st.Delete(ctx, "t-44"); err != nil {
		t.Fatal(err)
	}
	// a millisecond apart at least (Redis's clock), so that created
	// tells them apart
	for i := 0; i < 1e6 && rdb.Time(ctx).Val().UnixMilli() <= first.Created.UnixMilli(); i++ {
	}
	again, err := st.Put(ctx, "t-44", doc("@weekly"), Any)
	if err != nil || again.Version != 1 {
		t.Fatalf("put again after a delete: version %d (%v), want 1", again.Version, err)
	}
	if _, err := st.Put(ctx, "t-44", doc("@daily"), Match{Version: 1, Created: first.Created}); !errors.Is(err, ErrChanged) {
		t.Fatalf("a put over the deleted schedule's version 1: %v, want ErrChanged", err)
	}
	if r, err := st.Put(ctx, "t-44", doc("@daily"), Match{Version: 1, Created: again.Created}); err != nil || r.Version != 2 {
		t.Fatalf("a put over this one's version 1: %+v %v", r, err)
	}
}

// A put of the definition a schedule holds changes nothing: its version and
// times stay, and no change goes to the replicas; any other put is a change.
func TestPutOfTheSameDefinitionChangesNothing(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	st := New(rdb, "fs", handoff.NewSigner(testConfig(t, "security: {signing_keys: [\""+testKey+"\"]}\n").Security), 1)
	ctx := context.Background()
	doc := json.RawMessage(`{"schedule":"@hourly","handler":{"name":"h"}}`)
	r1, err := st.Put(ctx, "x", doc, Any)
	if err != nil {
		t.Fatal(err)
	}
	for _, cond := range []Match{Any, {Version: r1.Version}, {Version: r1.Version, Created: r1.Created}} {
		r, err := st.Put(ctx, "x", doc, cond)
		if err != nil || r.Version != r1.Version || !r.Created.Equal(r1.Created) || !r.Updated.Equal(r1.Updated) {
			t.Fatalf("the same put again (if %+v): %+v %v, want %+v", cond, r, err, r1)
		}
	}
	if n := rdb.XLen(ctx, newKeys("fs", 0, 1).log).Val(); n != 1 {
		t.Fatalf("%d changes logged, want 1", n)
	}
	// an index that lost the id has it again
	rdb.ZRem(ctx, newKeys("fs", 0, 1).ids, "x")
	if _, err := st.Put(ctx, "x", doc, Any); err != nil || rdb.ZScore(ctx, newKeys("fs", 0, 1).ids, "x").Err() != nil {
		t.Fatalf("the same put over a lost index entry: %v", err)
	}
	if r, err := st.Put(ctx, "x", json.RawMessage(`{"schedule":"@daily","handler":{"name":"h"}}`), Any); err != nil || r.Version == r1.Version {
		t.Fatalf("another definition: %+v %v, want a new version", r, err)
	}
}

// A Redis that restarted empty, or from an older snapshot, with no change
// made since, is found within a few seconds, not at the next resync: the
// schedules it no longer holds are put back, and the replica keeps running
// them.
func TestFollowerFindsARedisThatLostChangesWithoutANewOne(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	cfg := testConfig(t, "") // resync: 5m
	writer := New(rdb, cfg.Namespace, nil, 1)
	for i := range 3 {
		put(t, writer, fmt.Sprintf("old%d", i), `{schedule: "@hourly", handler: {name: h}}`)
	}
	_, _, a := following(t, rdb, cfg)
	if len(a.names()) != 3 {
		t.Fatalf("sync: %v", a.names())
	}
	if err := rdb.FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	poll.Require(t, 10*time.Second, "the schedules Redis lost put back", func() bool {
		n, _ := writer.Count(context.Background())
		return n == 3
	})
	if len(a.names()) != 3 {
		t.Fatalf("the copy after the restore: %v", a.names())
	}
}

// A schedule a worker looks up at every task, whose stored definition
// cannot be read (not signed with the key), is refused each time and
// logged once, not at every lookup.
func TestScheduleJobLogsAnUnreadableDefinitionOnce(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	cfg := testConfig(t, "security: {signing_keys: [\""+testKey+"\"]}\n")
	put(t, New(rdb, cfg.Namespace, nil, 1), "forged", `{schedule: "@hourly", handler: {name: h}}`)
	var logs safeBuffer
	f := NewFollower(New(rdb, cfg.Namespace, handoff.NewSigner(cfg.Security), 1), cfg, nil, WithFetch(),
		WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	for range 3 {
		if j, ok := f.ScheduleJob("@forged"); ok {
			t.Fatalf("found %+v", j)
		}
	}
	if n := strings.Count(logs.String(), "cannot read a runtime schedule"); n != 1 {
		t.Fatalf("logged %d times:\n%s", n, logs.String())
	}
}

// safeBuffer is a bytes.Buffer safe for concurrent use.
type safeBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *safeBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *safeBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A replica without the signing keys (signing being turned on replica by
// replica with accept_unsigned, or turned off) reads a definition signed
// by one with them as it was put: its signature, which is no key of a job,
// is not part of it.
func TestSignedDefinitionReadsWithoutTheKeys(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	signedCfg := testConfig(t, "security: {signing_keys: [\""+testKey+"\"]}\n")
	signed := New(rdb, signedCfg.Namespace, handoff.NewSigner(signedCfg.Security), 1)
	put(t, signed, "before", `{schedule: "@hourly", handler: {name: h}}`)
	st, f, a := following(t, rdb, testConfig(t, ""))
	rec := put(t, signed, "after", `{schedule: "@daily", handler: {name: h}}`)
	poll.Require(t, 10*time.Second, "both signed definitions applied by a follower without keys", func() bool {
		return (a.has("@before") && a.has("@after")) || len(f.Refused()) > 0
	})
	if r := f.Refused(); len(r) > 0 {
		t.Fatalf("refused %v", r)
	}
	got, err := st.Get(context.Background(), "after")
	if err != nil || string(got.Doc) != string(rec.Doc) {
		t.Errorf("read without keys: %s, %v; want %s", got.Doc, err, rec.Doc)
	}
}

// A put stores the definition it is given as it is, so it takes only what
// reads back the same: one compact JSON object, without the key "id" first
// (the earlier form's) or a last member "sig" (a signature's). Anything
// else is refused with why, and nothing is written.
func TestPutRefusesADefinitionThatWouldNotReadBackAsPut(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	ctx := context.Background()
	k := newKeys("fs", 0, 1)
	sig := `"sig":"` + strings.Repeat("A", 43) + `"`
	for _, sign := range []*handoff.Signer{nil, handoff.NewSigner(config.SecurityConfig{SigningKeys: []string{testKey}})} {
		st := New(rdb, "fs", sign, 1)
		for _, c := range []struct{ doc, why string }{
			{`{ }`, "not compact"},
			{`{"schedule" : "@hourly"}`, "not compact"},
			{` {"schedule":"@hourly"}`, "not compact"},
			{`{"schedule":"@hourly"}` + "\n", "not compact"},
			{`[{"schedule":"@hourly"}]`, "not a JSON object"},
			{`"{}"`, "not a JSON object"},
			{`{"schedule":"@hourly"`, "not a JSON object"},
			{`{"id":"x","doc":{}}`, `the key "id"`},
			{`{"schedule":"@hourly",` + sig + `}`, `member "sig"`},
		} {
			_, err := st.Put(ctx, "x", json.RawMessage(c.doc), Any)
			if err == nil || !strings.Contains(err.Error(), c.why) {
				t.Errorf("signed %v: put %q: %v, want refused as %s", sign.Enabled(), c.doc, err, c.why)
			}
		}
		if n := rdb.Exists(ctx, k.defs, k.ids, k.log, k.ver).Val(); n != 0 {
			t.Errorf("signed %v: refused puts wrote %d keys", sign.Enabled(), n)
		}
		// what reads back the same is stored
		for _, doc := range []string{`{}`, `{"a":"}\"sig\":\"x\"}"}`, `{"a":"é\u2028{\"id\":"}`} {
			if _, err := st.Put(ctx, "ok", json.RawMessage(doc), Any); err != nil {
				t.Errorf("signed %v: put %s: %v", sign.Enabled(), doc, err)
			} else if r, err := st.Get(ctx, "ok"); err != nil || string(r.Doc) != doc {
				t.Errorf("signed %v: put %s, read %s, %v", sign.Enabled(), doc, r.Doc, err)
			}
		}
		rdb.Del(ctx, k.defs, k.ids, k.log, k.ver)
	}
}
