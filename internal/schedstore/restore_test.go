package schedstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/handoff"
	"github.com/batonhq/baton/internal/redistest"
)

// stillFollower is a Follower that has read the store and follows it only
// when the test says (read): the schedules of the restore tests decide
// when each replica finds the store gone back.
type stillFollower struct {
	f   *Follower
	a   *applied
	got []WentBack
}

func newStillFollower(t *testing.T, st *Store, cfg *config.Config) *stillFollower {
	t.Helper()
	sf := &stillFollower{a: &applied{jobs: map[string]*config.Job{}}}
	sf.f = NewFollower(st, cfg, sf.a.apply, WithWentBack(func(w WentBack) { sf.got = append(sf.got, w) }))
	if err := sf.f.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	return sf
}

// read reads the store's only shard whole, as a resync does.
func (sf *stillFollower) read(t *testing.T) {
	t.Helper()
	if err := sf.f.syncShard(context.Background(), 0, false); err != nil {
		t.Fatal(err)
	}
}

// snapshot is what a Redis snapshot of the store's keys holds.
type snapshot map[string]string

func takeSnapshot(t *testing.T, rdb *redis.Client, k keys) snapshot {
	t.Helper()
	s := snapshot{}
	for _, key := range append(k.all(), k.restored) {
		if v, err := rdb.Dump(context.Background(), key).Result(); err == nil {
			s[key] = v
		}
	}
	return s
}

// bringBack restarts Redis from the snapshot: everything else is gone.
func (s snapshot) bringBack(t *testing.T, rdb *redis.Client) {
	t.Helper()
	ctx := context.Background()
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	for key, v := range s {
		if err := rdb.Restore(ctx, key, 0, v).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

func docOf(t *testing.T, st *Store, id string) string {
	t.Helper()
	r, err := st.Get(context.Background(), id)
	if err != nil {
		return "absent: " + err.Error()
	}
	return string(r.Doc)
}

// A Redis brought back from a snapshot older than a delete, an update and
// a put: the replica puts the store back to what it saw last (the deleted
// schedule deleted again, the update and the put back, each with its times),
// and reports what it found and did.
func TestRestoreAfterAnOlderSnapshotKeepsTheNewestState(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	cfg := testConfig(t, "")
	st := Of(rdb, cfg)
	put(t, st, "kept", `{schedule: "@hourly", handler: {name: h}}`)
	put(t, st, "deleted", `{schedule: "@hourly", handler: {name: h}}`)
	put(t, st, "updated", `{schedule: "@hourly", handler: {name: h}}`)
	snap := takeSnapshot(t, rdb, newKeys("fs", 0, 1))
	ctx := context.Background()
	if _, err := st.Delete(ctx, "deleted"); err != nil {
		t.Fatal(err)
	}
	newer := put(t, st, "updated", `{schedule: "@daily", handler: {name: h}}`)
	added := put(t, st, "added", `{schedule: "@hourly", handler: {name: h}}`)
	sf := newStillFollower(t, st, cfg)

	snap.bringBack(t, rdb)
	sf.read(t)
	if got := docOf(t, st, "deleted"); got[:7] != "absent:" {
		t.Errorf("the schedule deleted after the snapshot is back: %s", got)
	}
	if got := docOf(t, st, "updated"); got != `{"handler":{"name":"h"},"schedule":"@daily"}` {
		t.Errorf("the updated schedule holds %s, want its update", got)
	}
	r, err := st.Get(ctx, "added")
	if err != nil || !r.Created.Equal(added.Created) || !r.Updated.Equal(added.Updated) {
		t.Errorf("the schedule put after the snapshot: %+v %v, want it back with its times %v %v", r, err, added.Created, added.Updated)
	}
	if u, _ := st.Get(ctx, "updated"); !u.Updated.Equal(newer.Updated) || u.Version != 2 || newer.Version != 2 {
		t.Errorf("the update's time %v version %d, want %v and 2 (its version kept)", u.Updated, u.Version, newer.Updated)
	}
	if n, _ := st.Count(ctx); n != 3 || len(sf.a.names()) != 3 || sf.a.has("@deleted") {
		t.Errorf("store %d, copy %v: want kept, updated and added", n, sf.a.names())
	}
	if len(sf.got) != 1 || sf.got[0].PutBack != 2 || sf.got[0].Deleted != 1 || sf.got[0].Had != 6 || sf.got[0].Now != 3 {
		t.Errorf("reported %+v, want 2 put back and 1 deleted, from version 6 to 3", sf.got)
	}
	// the next read finds nothing gone back
	sf.read(t)
	if len(sf.got) != 1 {
		t.Errorf("reported again: %+v", sf.got)
	}
}

// What callers changed after Redis went back, before a replica found it,
// stands: a schedule put again and one deleted are not put back.
func TestRestoreLeavesWhatWasChangedSinceRedisWentBack(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	cfg := testConfig(t, "")
	st := Of(rdb, cfg)
	for _, id := range []string{"a", "b", "c"} {
		put(t, st, id, `{schedule: "@hourly", handler: {name: h}}`)
	}
	snap := takeSnapshot(t, rdb, newKeys("fs", 0, 1))
	put(t, st, "d", `{schedule: "@hourly", handler: {name: h}}`)
	sf := newStillFollower(t, st, cfg)
	snap.bringBack(t, rdb)
	// after the loss: a put over a, and c deleted
	put(t, st, "a", `{schedule: "@weekly", handler: {name: h}}`)
	if _, err := st.Delete(context.Background(), "c"); err != nil {
		t.Fatal(err)
	}
	sf.read(t)
	if got := docOf(t, st, "a"); got != `{"handler":{"name":"h"},"schedule":"@weekly"}` {
		t.Errorf("a holds %s, want the put made after the loss", got)
	}
	if got := docOf(t, st, "c"); got[:7] != "absent:" {
		t.Errorf("c, deleted after the loss, is back: %s", got)
	}
	if got := docOf(t, st, "d"); got[:7] == "absent:" {
		t.Errorf("d, lost, is not put back: %s", got)
	}
	if len(sf.got) != 1 || sf.got[0].PutBack != 1 || sf.got[0].Kept != 2 {
		t.Errorf("reported %+v, want d put back, a and c kept", sf.got)
	}
}

// Two replicas whose copies saw different changes restore after a Redis
// restarted empty: the copy that saw more wins, whichever restores first.
func TestRestoreByTheCopyThatSawMoreWinsInEitherOrder(t *testing.T) {
	for _, order := range []string{"older first", "newer first"} {
		t.Run(order, func(t *testing.T) {
			srv := redistest.New(t)
			rdb := srv.TestClient(t)
			cfg := testConfig(t, "")
			st := Of(rdb, cfg)
			put(t, st, "x", `{schedule: "@hourly", handler: {name: h}}`)
			older := newStillFollower(t, st, cfg) // has not read the update below
			put(t, st, "x", `{schedule: "@daily", handler: {name: h}}`)
			put(t, st, "y", `{schedule: "@daily", handler: {name: h}}`)
			newer := newStillFollower(t, st, cfg)
			if err := rdb.FlushAll(context.Background()).Err(); err != nil {
				t.Fatal(err)
			}
			first, second := older, newer
			if order == "newer first" {
				first, second = newer, older
			}
			first.read(t)
			second.read(t)
			if got := docOf(t, st, "x"); got != `{"handler":{"name":"h"},"schedule":"@daily"}` {
				t.Errorf("x holds %s, want the newer copy's", got)
			}
			if got := docOf(t, st, "y"); got[:7] == "absent:" {
				t.Errorf("y, which only the newer copy held, is %s", got)
			}
		})
	}
}

// A signed definition is put back as it was signed: a replica without the
// keys restores it, and replicas with the keys read it.
func TestRestoredDefinitionsStaySigned(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	signed := testConfig(t, "security: {signing_keys: [\""+testKey+"\"]}\n")
	st := New(rdb, signed.Namespace, handoff.NewSigner(signed.Security), 1)
	for i := range 3 {
		put(t, st, fmt.Sprintf("s%d", i), `{schedule: "@hourly", handler: {name: h}}`)
	}
	plain := testConfig(t, "")
	sf := newStillFollower(t, Of(rdb, plain), plain)
	if err := rdb.FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	sf.read(t)
	reader := newStillFollower(t, st, signed)
	if len(reader.a.names()) != 3 || len(reader.f.Refused()) != 0 {
		t.Fatalf("a reader with the keys holds %v, refuses %v", reader.a.names(), reader.f.Refused())
	}
}

// A replica that starts after Redis went back restores nothing: it knows
// nothing older than what Redis holds.
func TestRestoreNeedsACopyFromBeforeTheLoss(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	cfg := testConfig(t, "")
	st := Of(rdb, cfg)
	put(t, st, "a", `{schedule: "@hourly", handler: {name: h}}`)
	if err := rdb.FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	sf := newStillFollower(t, st, cfg)
	sf.read(t)
	if n, _ := st.Count(context.Background()); n != 0 || len(sf.got) != 0 {
		t.Fatalf("a replica that started after the loss put back %d and reported %v", n, sf.got)
	}
}

// A replica whose copy is older than another's restores after it: what
// the newer copy had seen deleted is not put back by the older one, even
// when the newer copy found nothing to put back.
func TestRestoreByAnOlderCopyLeavesWhatANewerOneSawDeleted(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	cfg := testConfig(t, "")
	st := Of(rdb, cfg)
	put(t, st, "x", `{schedule: "@hourly", handler: {name: h}}`)
	older := newStillFollower(t, st, cfg) // holds x
	if _, err := st.Delete(context.Background(), "x"); err != nil {
		t.Fatal(err)
	}
	newer := newStillFollower(t, st, cfg) // saw x deleted
	if err := rdb.FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	newer.read(t)
	older.read(t)
	if got := docOf(t, st, "x"); got[:7] != "absent:" {
		t.Errorf("x, deleted before the loss, is back: %s", got)
	}
}

// Redis went back a second time, to a snapshot taken after the first
// restore: what callers put between the two losses is put back, not left
// as the first restore wrote it.
func TestRestoreAfterASecondLossKeepsWhatWasPutSinceTheFirst(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	cfg := testConfig(t, "")
	st := Of(rdb, cfg)
	for range 5 {
		put(t, st, "x", `{schedule: "@hourly", handler: {name: h}}`)
	}
	sf := newStillFollower(t, st, cfg) // version 5
	if err := rdb.FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	sf.read(t) // x put back
	snap := takeSnapshot(t, rdb, newKeys("fs", 0, 1))
	put(t, st, "x", `{schedule: "@daily", handler: {name: h}}`)
	sf.read(t) // the copy holds x @daily
	snap.bringBack(t, rdb)
	sf.read(t)
	if got := docOf(t, st, "x"); got != `{"handler":{"name":"h"},"schedule":"@daily"}` {
		t.Errorf("x holds %s, want the put made between the losses", got)
	}
}

// Redis restarted empty with its clock behind the one it had: a put a
// caller made since (its stream entry before the copy's last) stands.
func TestRestoreLeavesAPutMadeSinceWhenTheClockWentBack(t *testing.T) {
	t.Skip("not yet: a restore tells callers' changes since the loss by their stream entries after the copy's last, which a Redis clock gone back puts before it")
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	cfg := testConfig(t, "")
	st := Of(rdb, cfg)
	put(t, st, "x", `{schedule: "@hourly", handler: {name: h}}`)
	put(t, st, "y", `{schedule: "@hourly", handler: {name: h}}`)
	sf := newStillFollower(t, st, cfg)
	// the entries the copy read were made by a clock an hour ahead
	ms, seq, _ := strings.Cut(sf.f.shards[0].last, "-")
	n, _ := strconv.ParseInt(ms, 10, 64)
	sf.f.shards[0].last = fmt.Sprintf("%d-%s", n+3600_000, seq)
	if err := rdb.FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	put(t, st, "x", `{schedule: "@daily", handler: {name: h}}`)
	sf.read(t)
	if got := docOf(t, st, "x"); got != `{"handler":{"name":"h"},"schedule":"@daily"}` {
		t.Errorf("x holds %s, want the put made after the loss", got)
	}
	if got := docOf(t, st, "y"); got[:7] == "absent:" {
		t.Errorf("y, lost, is not put back: %s", got)
	}
}

// A schedule this replica's config refuses (another replica runs it) is
// put back as stored when Redis loses it: the store is every replica's.
func TestRestorePutsBackWhatThisReplicaRefuses(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	cfg := testConfig(t, "")
	st := Of(rdb, cfg)
	put(t, st, "mine", `{schedule: "@hourly", handler: {name: h}}`)
	put(t, st, "theirs", `{schedule: "@hourly", handler: {name: h}, queue: elsewhere}`)
	sf := newStillFollower(t, st, cfg)
	if len(sf.f.Refused()) != 1 {
		t.Fatalf("refused %v, want theirs", sf.f.Refused())
	}
	if err := rdb.FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	sf.read(t)
	if got := docOf(t, st, "theirs"); got[:7] == "absent:" {
		t.Errorf("theirs, refused here, is not put back: %s", got)
	}
}

// What a caller changes while a replica restores, after it read the store,
// stands: a put, a delete, and a put then a delete of a schedule the store
// had lost.
func TestCallerChangesDuringARestoreStand(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	cfg := testConfig(t, "")
	st := Of(rdb, cfg)
	ctx := context.Background()
	for _, id := range []string{"put", "deleted"} {
		put(t, st, id, `{schedule: "@hourly", handler: {name: h}}`)
	}
	snap := takeSnapshot(t, rdb, newKeys("fs", 0, 1))
	for _, id := range []string{"put", "deleted", "putdeleted", "other"} {
		put(t, st, id, `{schedule: "@weekly", handler: {name: h}}`)
	}
	sf := newStillFollower(t, st, cfg)
	snap.bringBack(t, rdb)
	sf.f.beforeBatch = func() {
		sf.f.beforeBatch = nil
		put(t, st, "put", `{schedule: "@daily", handler: {name: h}}`)
		if _, err := st.Delete(ctx, "deleted"); err != nil {
			t.Error(err)
		}
		put(t, st, "putdeleted", `{schedule: "@daily", handler: {name: h}}`)
		if _, err := st.Delete(ctx, "putdeleted"); err != nil {
			t.Error(err)
		}
	}
	sf.read(t)
	if got := docOf(t, st, "put"); got != `{"handler":{"name":"h"},"schedule":"@daily"}` {
		t.Errorf("put holds %s, want the caller's put", got)
	}
	for _, id := range []string{"deleted", "putdeleted"} {
		if got := docOf(t, st, id); got[:7] != "absent:" {
			t.Errorf("%s, deleted by a caller during the restore, is %s", id, got)
		}
	}
	if got := docOf(t, st, "other"); got != `{"handler":{"name":"h"},"schedule":"@weekly"}` {
		t.Errorf("other holds %s, want it put back", got)
	}
	if len(sf.got) != 1 || sf.got[0].PutBack != 1 || sf.got[0].Superseded != 3 {
		t.Errorf("reported %+v, want other put back, the 3 others changed meanwhile", sf.got)
	}
}

// A version a caller read before Redis went back names that definition
// only: once a replica restored the store, puts made since the loss do not
// count the schedule's versions up to it again, and a put conditioned on
// the version (and created) read before the loss fails.
func TestAVersionReadBeforeALossDoesNotMatchAPutMadeSince(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	cfg := testConfig(t, "")
	st := Of(rdb, cfg)
	ctx := context.Background()
	put(t, st, "x", `{schedule: "@hourly", handler: {name: h}}`)
	snap := takeSnapshot(t, rdb, newKeys("fs", 0, 1))
	put(t, st, "x", `{schedule: "@daily", handler: {name: h}}`)
	read := put(t, st, "x", `{schedule: "@weekly", handler: {name: h}}`) // version 3, what the caller read
	sf := newStillFollower(t, st, cfg)
	snap.bringBack(t, rdb) // x at version 1 again
	// another caller's put since the loss stands (restore_test's
	// TestRestoreLeavesWhatWasChangedSinceRedisWentBack)
	put(t, st, "x", `{schedule: "@monthly", handler: {name: h}}`)
	sf.read(t)
	if len(sf.got) != 1 || sf.got[0].Kept != 1 {
		t.Fatalf("reported %+v, want x kept", sf.got)
	}
	// and one more, after the restore
	now := put(t, st, "x", `{schedule: "@yearly", handler: {name: h}}`)
	d, err := config.ScheduleDocument([]byte(`{schedule: "0 9 * * 1", handler: {name: h}}`))
	if err != nil {
		t.Fatal(err)
	}
	if r, err := st.Put(ctx, "x", d, Match{Version: read.Version, Created: read.Created}); !errors.Is(err, ErrChanged) {
		t.Fatalf("a put over version %d created %v, read (@weekly) before the loss, succeeded over @yearly (version %d created %v): %+v %v",
			read.Version, read.Created, now.Version, now.Created, r, err)
	}
}

// A caller's delete of a schedule the store lost, made while a replica
// restores the shard (the store does not hold it yet: the delete finds
// none), stands as a delete that found it does: neither that replica's
// restore nor another's, whose copy saw as much and which reads the store
// after the delete and after another change, puts it back.
func TestADeleteOfALostScheduleDuringARestoreStands(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	cfg := testConfig(t, "")
	st := Of(rdb, cfg)
	ctx := context.Background()
	put(t, st, "kept", `{schedule: "@hourly", handler: {name: h}}`)
	snap := takeSnapshot(t, rdb, newKeys("fs", 0, 1))
	put(t, st, "lost", `{schedule: "@weekly", handler: {name: h}}`)
	first, second := newStillFollower(t, st, cfg), newStillFollower(t, st, cfg)
	snap.bringBack(t, rdb) // lost is gone
	first.f.beforeBatch = func() {
		first.f.beforeBatch = nil
		if ok, err := st.Delete(ctx, "lost"); ok || err != nil {
			t.Errorf("a delete of a schedule the store does not hold: %v %v, want none found", ok, err)
		}
	}
	first.read(t)
	if got := docOf(t, st, "lost"); !strings.HasPrefix(got, "absent:") {
		t.Fatalf("lost, deleted by a caller while the restore ran, was put back: %s (reported %+v)", got, first.got)
	}
	put(t, st, "other", `{schedule: "@daily", handler: {name: h}}`)
	second.read(t)
	if got := docOf(t, st, "lost"); !strings.HasPrefix(got, "absent:") {
		t.Errorf("lost, deleted by a caller while a restore ran, was put back by another replica's: %s (reported %+v)", got, second.got)
	}
	if got := docOf(t, st, "kept"); got != `{"handler":{"name":"h"},"schedule":"@hourly"}` {
		t.Errorf("kept holds %s", got)
	}
}
