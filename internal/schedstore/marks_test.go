package schedstore

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
)

// signedConfig is a config with a signing key.
func signedConfig(t *testing.T) *config.Config {
	return testConfig(t, "security: {signing_keys: [\""+testKey+"\"]}\n")
}

// rawOf is schedule id's stored value, as a writer of the queue Redis
// reads it.
func rawOf(t *testing.T, rdb *redis.Client, id string) string {
	t.Helper()
	v, err := rdb.HGet(context.Background(), newKeys("fs", 0, 1).defs, id).Result()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// putBack is a writer of the queue Redis (no signing key) putting raw back
// as schedule id and logging it as a change, as put.lua would, so that the
// replicas read it at once.
func putBack(t *testing.T, rdb *redis.Client, id, raw string) {
	t.Helper()
	ctx := context.Background()
	k := newKeys("fs", 0, 1)
	ver, err := rdb.Incr(ctx, k.ver).Result()
	if err != nil {
		t.Fatal(err)
	}
	rdb.HSet(ctx, k.defs, id, raw)
	rdb.ZAdd(ctx, k.ids, redis.Z{Member: id})
	rdb.XAdd(ctx, &redis.XAddArgs{Stream: k.log, Values: []any{"ver", ver, "id", id, "op", "put"}})
}

// followingMarked is following with the replicas' marks kept on a lock
// master of their own, which the store's puts read as well.
func followingMarked(t *testing.T, rdb *redis.Client, cfg *config.Config) (*Store, *Follower, *applied) {
	t.Helper()
	keep := NewMasterMarks([]redis.UniversalClient{redistest.New(t).TestClient(t)}, cfg.Namespace)
	return followingStore(t, Of(rdb, cfg).WithMarks(keep), cfg, WithMarks(keep))
}

// refusal returns why f refuses id, "" when it does not.
func refusal(f *Follower, id string) string {
	for _, r := range f.Refused() {
		if r.ID == id {
			return r.Err.Error()
		}
	}
	return ""
}

// A signed put binds its definition to the version and created it is
// stored as: a head changed by a writer of the queue Redis (to pass an old
// definition off as a newer version) breaks the signature.
func TestSignedPutBindsTheDefinitionToItsVersion(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	cfg := signedConfig(t)
	st := Of(rdb, cfg)
	r1 := put(t, st, "a", `{schedule: "@hourly", handler: {name: h}}`)
	r2 := put(t, st, "a", `{schedule: "@daily", handler: {name: h}}`)
	if !r1.Bound || !r2.Bound || r2.Version != 2 || !r2.Created.Equal(r1.Created) {
		t.Fatalf("puts %+v, %+v", r1, r2)
	}
	// the same definition again changes nothing
	if r3 := put(t, st, "a", `{schedule: "@daily", handler: {name: h}}`); r3.Version != 2 || !r3.Bound {
		t.Fatalf("the same definition again: %+v", r3)
	}
	got, err := st.Get(context.Background(), "a")
	if err != nil || !got.Bound || got.Version != 2 {
		t.Fatalf("get %+v %v", got, err)
	}
	// version 1's definition under a head that says version 3
	v1 := strings.Replace(r1raw(t, st, r1), "|1|{", "|3|{", 1)
	rdb.HSet(context.Background(), newKeys("fs", 0, 1).defs, "a", v1)
	if _, err := st.Get(context.Background(), "a"); err == nil || !strings.Contains(err.Error(), "signature") {
		t.Fatalf("a definition under another version's head read as %v", err)
	}
}

// r1raw rebuilds the stored value of version 1 of r1's schedule: its head
// and its definition signed for it.
func r1raw(t *testing.T, st *Store, r1 Record) string {
	t.Helper()
	ms := r1.Created.UnixMilli()
	body := st.sign.Sign(st.boundDomain(r1.ID, ms, 1), r1.Doc)
	return strings.Join([]string{itoa(ms), "+0", "1", "1", string(body)}, "|")
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// Puts of one id from many callers at once each land, as one version each:
// a signed put that lost a race reads the schedule again.
func TestConcurrentSignedPutsEachLandOnce(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	st := Of(rdb, signedConfig(t))
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Go(func() {
			for n := range 4 {
				d, _ := config.ScheduleDocument([]byte(`{schedule: "@hourly", handler: {name: h, payload: {g: ` + itoa(int64(g)) + `, n: ` + itoa(int64(n)) + `}}}`))
				if _, err := st.Put(context.Background(), "shared", d, Any); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	got, err := st.Get(context.Background(), "shared")
	if err != nil || got.Version != 24 || !got.Bound {
		t.Fatalf("after 24 puts: %+v %v", got, err)
	}
}

// A writer of the queue Redis puts back a copy of an older version of a
// schedule it read earlier (signed, as the replicas wrote it): the
// replicas that saw the newer one refuse it, by the stream of changes and
// by a full read alike, and run neither; a new put runs again.
func TestAnOlderDefinitionPutBackIsRefused(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	cfg := signedConfig(t)
	st, f, a := followingMarked(t, rdb, cfg)
	put(t, st, "a", `{schedule: "@hourly", handler: {name: h}}`)
	v1 := rawOf(t, rdb, "a")
	put(t, st, "a", `{schedule: "@daily", handler: {name: h}}`)
	poll.Require(t, 10*time.Second, "version 2 applied", func() bool {
		j, ok := f.ScheduleJob("@a")
		return ok && j.Ref.Version == 2
	})
	putBack(t, rdb, "a", v1)
	poll.Require(t, 10*time.Second, "the copy of version 1 refused", func() bool { return refusal(f, "a") != "" })
	if why := refusal(f, "a"); !strings.Contains(why, "version 1") || !strings.Contains(why, "saw version 2") {
		t.Errorf("refused for %q", why)
	}
	if a.has("@a") {
		t.Fatal("the schedule still runs with a definition put back")
	}
	if _, ok := f.ScheduleJob("@a"); ok {
		t.Fatal("a lookup finds the definition put back")
	}
	// a full read (a resync) refuses it too
	if err := f.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if refusal(f, "a") == "" || a.has("@a") {
		t.Fatal("a resync took the definition put back")
	}
	// the owner puts it again: it runs, as version 3
	put(t, st, "a", `{schedule: "@hourly", handler: {name: h}}`)
	poll.Require(t, 10*time.Second, "the new put applied", func() bool { return a.has("@a") && refusal(f, "a") == "" })
	if j, _ := f.ScheduleJob("@a"); j.Ref.Version != 3 {
		t.Fatalf("runs %s", j.Ref)
	}
}

// A schedule deleted and its last definition put back by a writer of the
// queue Redis stays deleted; the id put again by its owner runs.
func TestADeletedDefinitionPutBackIsRefused(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	st, f, a := followingMarked(t, rdb, signedConfig(t))
	put(t, st, "gone", `{schedule: "@hourly", handler: {name: h}}`)
	raw := rawOf(t, rdb, "gone")
	poll.Require(t, 10*time.Second, "the put applied", func() bool { return a.has("@gone") })
	if _, err := st.Delete(context.Background(), "gone"); err != nil {
		t.Fatal(err)
	}
	poll.Require(t, 10*time.Second, "the delete applied", func() bool { return !a.has("@gone") })
	putBack(t, rdb, "gone", raw)
	poll.Require(t, 10*time.Second, "the copy refused", func() bool { return refusal(f, "gone") != "" })
	if why := refusal(f, "gone"); !strings.Contains(why, "which was deleted") {
		t.Errorf("refused for %q", why)
	}
	if a.has("@gone") {
		t.Fatal("a deleted schedule runs again")
	}
	put(t, st, "gone", `{schedule: "@daily", handler: {name: h}}`)
	poll.Require(t, 10*time.Second, "the id put again runs", func() bool { return a.has("@gone") })
}

// A definition signed for its id alone (before definitions were bound to
// their version) put back over a bound one is refused: its head says
// nothing the signature vouches for.
func TestADefinitionSignedForItsIdAlonePutBackOverABoundOneIsRefused(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	st, f, a := following(t, rdb, signedConfig(t))
	r := put(t, st, "a", `{schedule: "@hourly", handler: {name: h}}`)
	poll.Require(t, 10*time.Second, "the put applied", func() bool { return a.has("@a") })
	legacy := strings.Join([]string{itoa(r.Created.UnixMilli()), "+0", "9", "9", string(st.sign.Sign(st.recordDomain("a"), r.Doc))}, "|")
	putBack(t, rdb, "a", legacy)
	poll.Require(t, 10*time.Second, "the unbound copy refused", func() bool { return refusal(f, "a") != "" })
	if why := refusal(f, "a"); !strings.Contains(why, "signed for its id alone") {
		t.Errorf("refused for %q", why)
	}
}

// The marks outlive the replicas: kept on the lock masters (here one
// server apart from the queue Redis), a replica started after every one
// that saw the newer definitions went away refuses the copies put back,
// where one without them would run them; so does a lookup of a follower
// that does not sync (an admin tool's trigger).
func TestMarksOutliveTheReplicas(t *testing.T) {
	srv, master := redistest.New(t), redistest.New(t)
	rdb, mrdb := srv.TestClient(t), master.TestClient(t)
	cfg := signedConfig(t)
	keep := NewMasterMarks([]redis.UniversalClient{mrdb}, cfg.Namespace)
	st := Of(rdb, cfg)
	put(t, st, "a", `{schedule: "@hourly", handler: {name: h}}`)
	v1 := rawOf(t, rdb, "a")
	put(t, st, "gone", `{schedule: "@hourly", handler: {name: h}}`)
	gone := rawOf(t, rdb, "gone")
	first := NewFollower(st, cfg, nil, WithMarks(keep))
	if err := first.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	put(t, st, "a", `{schedule: "@daily", handler: {name: h}}`)
	if _, err := st.Delete(context.Background(), "gone"); err != nil {
		t.Fatal(err)
	}
	if err := first.Sync(context.Background()); err != nil { // the replica sees both changes, and goes away
		t.Fatal(err)
	}
	putBack(t, rdb, "a", v1)
	putBack(t, rdb, "gone", gone)

	later := NewFollower(st, cfg, nil, WithMarks(keep))
	if err := later.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if refusal(later, "a") == "" || refusal(later, "gone") == "" || later.Len() != 0 {
		t.Fatalf("a replica started later runs %d, refuses %v", later.Len(), later.Refused())
	}
	lookup := NewFollower(st, cfg, nil, WithFetch(), WithMarks(keep))
	if _, ok := lookup.ScheduleJob("@a"); ok {
		t.Error("a lookup found the older definition put back")
	}
	if _, ok := lookup.ScheduleJob("@gone"); ok {
		t.Error("a lookup found the deleted schedule put back")
	}
	// without the marks kept, a replica started later has nothing to
	// compare with: it would run them
	bare := NewFollower(st, cfg, nil)
	if err := bare.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if bare.Len() != 2 {
		t.Fatalf("control: a replica without marks runs %d", bare.Len())
	}
}

// A mark is raised only: a lower one written after a higher (a replica
// that saw less, late) leaves the higher; the lock master holds them where
// the queue Redis's writer cannot reach them.
func TestMarksAreRaisedOnly(t *testing.T) {
	master := redistest.New(t)
	keep := NewMasterMarks([]redis.UniversalClient{master.TestClient(t)}, "fs")
	ctx := context.Background()
	steps := []struct {
		m    Mark
		want Mark
	}{
		{Mark{Created: 10, Version: 2}, Mark{Created: 10, Version: 2}},
		{Mark{Created: 10, Version: 1}, Mark{Created: 10, Version: 2}},
		{Mark{Created: 10, Version: 2, Deleted: true}, Mark{Created: 10, Version: 2, Deleted: true}},
		{Mark{Created: 10, Version: 5}, Mark{Created: 10, Version: 2, Deleted: true}},
		{Mark{Created: 11, Version: 1}, Mark{Created: 11, Version: 1}},
	}
	for i, s := range steps {
		if err := keep.Raise(ctx, map[string]Mark{"x": s.m}); err != nil {
			t.Fatal(err)
		}
		got, ok, err := keep.Get(ctx, "x")
		if err != nil || !ok || got != s.want {
			t.Fatalf("step %d: raised %v, holds %v (%v %v), want %v", i, s.m, got, ok, err, s.want)
		}
		ms, err := keep.Load(ctx)
		if err != nil || ms["x"] != s.want {
			t.Fatalf("step %d: load %v %v", i, ms, err)
		}
	}
}

// A version the queue Redis lost (brought back from a snapshot taken
// before it, read by no replica) is not signed again for another
// definition: a writer of the queue Redis that read the lost one cannot
// put it back over the put made since, and have it run as the same
// version.
func TestAVersionLostWithAnOlderSnapshotIsNotSignedAgain(t *testing.T) {
	srv, master := redistest.New(t), redistest.New(t)
	rdb := srv.TestClient(t)
	cfg := signedConfig(t)
	keep := NewMasterMarks([]redis.UniversalClient{master.TestClient(t)}, cfg.Namespace)
	st := Of(rdb, cfg).WithMarks(keep)
	put(t, st, "a", `{schedule: "@hourly", handler: {name: h}}`)
	snap := takeSnapshot(t, rdb, newKeys("fs", 0, 1))
	put(t, st, "a", `{schedule: "@daily", handler: {name: h}}`)
	lost := rawOf(t, rdb, "a") // the writer reads version 2
	snap.bringBack(t, rdb)     // before any replica read it
	now := put(t, st, "a", `{schedule: "@weekly", handler: {name: h}}`)
	f := NewFollower(st, cfg, nil, WithMarks(keep))
	if err := f.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	putBack(t, rdb, "a", lost)
	if err := f.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if j, ok := f.ScheduleJob("@a"); ok && j.Ref.Version <= now.Version {
		t.Fatalf("the lost version 2 put back runs as %s (the put since is version %d, created %v)", j.Ref, now.Version, now.Created)
	}
}

// failingMarks is a lock master that cannot be written for a while.
type failingMarks struct {
	Marks
	fail atomic.Bool
}

func (m *failingMarks) Raise(ctx context.Context, ms map[string]Mark) error {
	if m.fail.Load() {
		return errors.New("lock masters unreachable")
	}
	return m.Marks.Raise(ctx, ms)
}

// A put made after the queue Redis went back, before the replica that
// followed it across the loss found it, stands signed and runs, when the
// lock masters could not take that replica's mark of the newer version it
// had seen: the restore leaves a definition its signature vouches for.
func TestAPutMadeAfterRedisWentBackStaysSignedThroughTheRestore(t *testing.T) {
	rdb, cfg, keep, st := storeWithFailingMarks(t)
	put(t, st, "a", `{schedule: "@hourly", handler: {name: h}}`)
	snap := takeSnapshot(t, rdb, newKeys("fs", 0, 1))
	put(t, st, "a", `{schedule: "@daily", handler: {name: h}}`)
	sf := &stillFollower{a: &applied{jobs: map[string]*config.Job{}}}
	sf.f = NewFollower(st, cfg, sf.a.apply, WithMarks(keep), WithWentBack(func(w WentBack) { sf.got = append(sf.got, w) }))
	keep.fail.Store(true) // the replica's mark of version 2 is not kept
	if err := sf.f.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	keep.fail.Store(false)
	snap.bringBack(t, rdb)
	put(t, st, "a", `{schedule: "@weekly", handler: {name: h}}`)
	sf.read(t)
	r, err := st.Get(context.Background(), "a")
	if err != nil || string(r.Doc) != `{"handler":{"name":"h"},"schedule":"@weekly"}` {
		t.Fatalf("after the restore the store holds %+v, %v; want the put made since", r, err)
	}
	if j, ok := sf.f.ScheduleJob("@a"); !ok || j.Schedule != "@weekly" {
		t.Fatalf("the replica runs %+v (%v), refuses %v", j, ok, sf.f.Refused())
	}
}

// A schedule deleted, brought back by a Redis restarted from an older
// snapshot, and put again by its owner before the replica that saw the
// delete found Redis gone back, runs: when the lock masters could not
// take that replica's mark of the delete, the put still signs a new
// schedule (the delete's own mark), not a version of the deleted one that
// the replica refuses.
func TestAPutOverADeletedScheduleBroughtBackIsNotRefused(t *testing.T) {
	rdb, cfg, keep, st := storeWithFailingMarks(t)
	ctx := context.Background()
	put(t, st, "a", `{schedule: "@hourly", handler: {name: h}}`)
	sf := &stillFollower{a: &applied{jobs: map[string]*config.Job{}}}
	sf.f = NewFollower(st, cfg, sf.a.apply, WithMarks(keep), WithWentBack(func(w WentBack) { sf.got = append(sf.got, w) }))
	if err := sf.f.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	snap := takeSnapshot(t, rdb, newKeys("fs", 0, 1))
	if _, err := st.Delete(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	keep.fail.Store(true) // the replica's mark of the delete is not kept
	sf.read(t)
	keep.fail.Store(false)
	snap.bringBack(t, rdb)
	put(t, st, "a", `{schedule: "@daily", handler: {name: h}}`)
	sf.read(t)
	if j, ok := sf.f.ScheduleJob("@a"); !ok || j.Schedule != "@daily" {
		t.Fatalf("the replica runs %+v (%v), refuses %v", j, ok, sf.f.Refused())
	}
}

// The marks do not hang on the shard count: after baton init moved the
// schedules to more shards, a deleted schedule's copy put back is refused
// by a replica of the new layout as before, and the owner's put over it
// signs a new schedule that the replica takes (not a version of the
// deleted one, refused for a mark the put did not find).
func TestMarksFollowTheSchedulesToAnotherShardCount(t *testing.T) {
	srv, master := redistest.New(t), redistest.New(t)
	rdb := srv.TestClient(t)
	ctx := context.Background()
	one := signedConfig(t)
	two := testConfig(t, "security: {signing_keys: [\""+testKey+"\"]}\nschedules: {shards: 2}\n")
	keep := NewMasterMarks([]redis.UniversalClient{master.TestClient(t)}, one.Namespace)
	id := ""
	for i := range 100 {
		if c := "m" + itoa(int64(i)); config.ScheduleShard(c, 2) != 0 {
			id = c
			break
		}
	}
	st := Of(rdb, one).WithMarks(keep)
	put(t, st, id, `{schedule: "@hourly", handler: {name: h}}`)
	gone := rawOf(t, rdb, id)
	f := NewFollower(st, one, nil, WithMarks(keep))
	if err := f.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := Move(ctx, rdb, one.Namespace, []int{1}, 2, nil); err != nil {
		t.Fatal(err)
	}
	st2 := Of(rdb, two).WithMarks(keep)
	k := st2.keysOf(id)
	rdb.HSet(ctx, k.defs, id, gone) // the writer puts the deleted one back
	rdb.ZAdd(ctx, k.ids, redis.Z{Member: id})
	f2 := NewFollower(st2, two, nil, WithMarks(keep))
	if err := f2.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if f2.Len() != 0 {
		t.Fatalf("a replica of the new layout runs the deleted schedule put back")
	}
	put(t, st2, id, `{schedule: "@daily", handler: {name: h}}`)
	if err := f2.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if j, ok := f2.ScheduleJob("@" + id); !ok || j.Schedule != "@daily" {
		t.Fatalf("the replica runs %+v (%v), refuses %v", j, ok, f2.Refused())
	}
}

// Puts of one id from many callers at once, with the replicas' marks and
// the versions signed kept on lock masters, each land, each signed for a
// version of its own, and a replica that follows them runs the last.
func TestConcurrentSignedPutsWithMarksEachLandOnce(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	cfg := signedConfig(t)
	st, f, _ := followingMarked(t, rdb, cfg)
	var mu sync.Mutex
	versions := map[int64]bool{}
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Go(func() {
			for n := range 4 {
				d, _ := config.ScheduleDocument([]byte(`{schedule: "@hourly", handler: {name: h, payload: {g: ` + itoa(int64(g)) + `, n: ` + itoa(int64(n)) + `}}}`))
				r, err := st.Put(context.Background(), "shared", d, Any)
				if err != nil {
					t.Error(err)
					continue
				}
				mu.Lock()
				if versions[r.Version] {
					t.Errorf("version %d landed twice", r.Version)
				}
				versions[r.Version] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	got, err := st.Get(context.Background(), "shared")
	if err != nil || got.Version < 24 || !got.Bound || len(versions) != 24 {
		t.Fatalf("after 24 puts: %+v %v, versions %v", got, err, versions)
	}
	poll.Require(t, 10*time.Second, "the last put applied", func() bool {
		j, ok := f.ScheduleJob("@shared")
		return ok && j.Ref.Version == got.Version
	})
	if r := f.Refused(); len(r) != 0 {
		t.Fatalf("refused %v", r)
	}
}

// The owner's put of the definition an older copy put back holds (a
// writer of the queue Redis put version 1 back, silently, where version 2
// was signed since) signs it again, as a version above the one signed
// last, when the lock masters could not take the replicas' mark of
// version 2: it does not leave the copy in place, which the replica that
// saw version 2 refuses, while the put reports it stored.
func TestAPutOfTheDefinitionACopyPutBackHoldsSignsItAgain(t *testing.T) {
	rdb, cfg, keep, st := storeWithFailingMarks(t)
	ctx := context.Background()
	put(t, st, "a", `{schedule: "@hourly", handler: {name: h}}`)
	v1 := rawOf(t, rdb, "a")
	put(t, st, "a", `{schedule: "@daily", handler: {name: h}}`)
	f := NewFollower(st, cfg, nil, WithMarks(keep))
	keep.fail.Store(true) // the replica's mark of version 2 is not kept
	if err := f.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	keep.fail.Store(false)
	rdb.HSet(ctx, newKeys("fs", 0, 1).defs, "a", v1) // put back, not logged
	r := put(t, st, "a", `{schedule: "@hourly", handler: {name: h}}`)
	if err := f.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if j, ok := f.ScheduleJob("@a"); !ok || j.Schedule != "@hourly" {
		t.Fatalf("the put reported %s stored; the replica runs %+v (%v), refuses %v", r.Ref(), j, ok, f.Refused())
	}
}

// storeWithFailingMarks is a signed store on a queue Redis (rdb) whose
// marks (keep) live on a lock master of their own and can be made to fail.
func storeWithFailingMarks(t *testing.T) (*redis.Client, *config.Config, *failingMarks, *Store) {
	t.Helper()
	cfg := signedConfig(t)
	keep := &failingMarks{Marks: NewMasterMarks([]redis.UniversalClient{redistest.New(t).TestClient(t)}, cfg.Namespace)}
	rdb := redistest.New(t).TestClient(t)
	return rdb, cfg, keep, Of(rdb, cfg).WithMarks(keep)
}
