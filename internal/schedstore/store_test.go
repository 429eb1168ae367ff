package schedstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/redistest"
)

// A schedule deleted and put again within the same millisecond of Redis's
// clock is not the schedule an ETag of the first one named: a put
// conditioned on the first one's version and created fails over it.
func TestPutOverAScheduleDeletedAndPutAgainInTheSameMillisecondFails(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	st := New(rdb, "fs", nil, 1)
	ctx := context.Background()
	hourly := `{"handler":{"name":"h"},"schedule":"@hourly"}`
	daily := `{"handler":{"name":"h"},"schedule":"@daily"}`
	for i := range 20 {
		id := fmt.Sprintf("x-%d", i)
		k := st.keysOf(id)
		// put, delete and put again, one right after the other (the
		// scripts as Put and Delete run them)
		var first, again *redis.Cmd
		_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			first = p.Eval(ctx, putSrc, k.all(), id, hourly, LogLength, "", "")
			p.Eval(ctx, recordSrc+logDeleteSrc+deleteSrc, append(k.all(), k.restored), id, LogLength)
			again = p.Eval(ctx, putSrc, k.all(), id, daily, LogLength, "", "")
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		a, _ := first.Int64Slice()
		b, _ := again.Int64Slice()
		if len(a) != 4 || len(b) != 4 || a[3] != 1 || b[3] != 1 {
			t.Fatalf("%s: puts answered %v and %v, want two first versions", id, a, b)
		}
		// the first one's ETag: version 1, its created
		read := Match{Version: a[3], Created: msTime(a[1])}
		if r, err := st.Put(ctx, id, json.RawMessage(`{"handler":{"name":"h"},"schedule":"@weekly"}`), read); !errors.Is(err, ErrChanged) {
			t.Fatalf("%s: a put over the deleted schedule's version 1 (created %d; the one put again: %d) succeeded over a schedule it never read: %+v %v",
				id, a[1], b[1], r, err)
		}
	}
}

// A put conditioned on a version (and created) applies only over a record
// as the readers read it: over a value they report corrupt it fails, and
// over one they read at version V created C it succeeds with V and C.
func TestConditionalPutReadsTheStoredValueAsReadersDo(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	st := New(rdb, "fs", nil, 1)
	ctx := context.Background()
	defs := newKeys("fs", 0, 1).defs
	doc := `{"handler":{"name":"h"},"schedule":"@hourly"}`
	daily := json.RawMessage(`{"handler":{"name":"h"},"schedule":"@daily"}`)
	for _, v := range []string{
		"garbage",
		"1700000000000|+5|3|x|" + doc,            // not a version where it goes
		"1700000000000|+5|3|0|" + doc,            // version 0: none was put so
		"1700000000000|+5|3|-2|" + doc,           // a negative version
		"+1700000000000|+5|3|2|" + doc,           // a signed created
		"1700000000000|+5|++3|2|" + doc,          // a change signed twice
		"1700000000000|+5|3|02|" + doc,           // a version with a leading zero
		"01700000000000|+5|3|2|" + doc,           // created with a leading zero
		"1700000000000|+5|3|2|" + doc,            // as put writes it
		"1700000000000|1700000000005|3|" + doc,   // the earlier head (version 1)
		"1700000000000|+5|3|7|" + doc,            // as a move or restore leaves it
		"1700000000000|1699999999000|3|4|" + doc, // updated before created (the clock went back)
	} {
		if err := rdb.HSet(ctx, defs, "x", v).Err(); err != nil {
			t.Fatal(err)
		}
		rec, readErr := st.Get(ctx, "x")
		if readErr != nil {
			var ce *CorruptError
			if !errors.As(readErr, &ce) {
				t.Errorf("%q: read %v, want a CorruptError", v, readErr)
			}
			for _, m := range []Match{{Version: 1}, {Version: 0}} {
				if r, err := st.Put(ctx, "x", daily, m); !errors.Is(err, ErrChanged) {
					t.Errorf("%q, which readers report corrupt (%v): a put if version %d succeeded over it: %+v %v", v, readErr, m.Version, r, err)
				}
			}
			continue
		}
		r, err := st.Put(ctx, "x", daily, Match{Version: rec.Version, Created: rec.Created})
		if err != nil || r.Version != rec.Version+1 || !r.Created.Equal(rec.Created) {
			t.Errorf("%q, read as version %d created %d: a put over what was read: %+v %v, want version %d, the same created",
				v, rec.Version, rec.Created.UnixMilli(), r, err, rec.Version+1)
		}
	}
}

func msTime(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// A schedule created by a clock ahead of Redis's (put back by a restore
// after Redis restarted with its clock behind), deleted and put again
// while Redis's clock passes that created, is not the schedule an ETag of
// the first one named.
func TestPutOverAScheduleDeletedWhileRedisClockWasBehindItsCreatedFails(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	st := New(rdb, "fs", nil, 1)
	ctx := context.Background()
	doc := json.RawMessage(`{"handler":{"name":"h"},"schedule":"@hourly"}`)
	created := rdb.Time(ctx).Val().UnixMilli() + 40
	if err := rdb.HSet(ctx, newKeys("fs", 0, 1).defs, "x", fmt.Sprintf("%d|+0|7|1|%s", created, doc)).Err(); err != nil {
		t.Fatal(err)
	}
	read, err := st.Get(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	// deleted and put again until Redis's clock is past its created
	for rdb.Time(ctx).Val().UnixMilli() <= created+5 {
		if _, err := st.Delete(ctx, "x"); err != nil {
			t.Fatal(err)
		}
		again := put(t, st, "x", `{schedule: "@daily", handler: {name: h}}`)
		if r, err := st.Put(ctx, "x", doc, Match{Version: read.Version, Created: read.Created}); !errors.Is(err, ErrChanged) {
			t.Fatalf("a put over version 1 created %d, the schedule deleted, succeeded over the one put again (created %d): %+v %v",
				created, again.Created.UnixMilli(), r, err)
		}
	}
}

// A conditional delete reads the stored value as a conditional put does: a
// value readers cannot read matches no condition (a delete without one
// removes it), a version or created that does not match deletes nothing.
func TestConditionalDeleteReadsTheStoredValueAsAPutDoes(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	st := New(rdb, "fs", nil, 1)
	ctx := context.Background()
	r, err := st.Put(ctx, "x", json.RawMessage(`{"handler":{"name":"h"},"schedule":"@hourly"}`), Any)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []Match{{Version: 2}, {Version: 0}, {Version: 1, Created: r.Created.Add(time.Millisecond)}} {
		if ok, _, err := st.DeleteIf(ctx, "x", m); ok || !errors.Is(err, ErrChanged) {
			t.Fatalf("delete if %+v: %v %v, want ErrChanged", m, ok, err)
		}
	}
	if ok, _, err := st.DeleteIf(ctx, "x", Match{Version: 1, Created: r.Created}); !ok || err != nil {
		t.Fatalf("delete over its version and created: %v %v", ok, err)
	}
	if ok, _, err := st.DeleteIf(ctx, "x", Match{Version: 1}); ok || !errors.Is(err, ErrChanged) || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("a conditional delete of none: %v %v", ok, err)
	}
	rdb.HSet(ctx, st.keysOf("y").defs, "y", "not a record")
	if ok, _, err := st.DeleteIf(ctx, "y", Match{Version: 1}); ok || !errors.Is(err, ErrChanged) || !strings.Contains(err.Error(), "not a baton schedule record") {
		t.Fatalf("a conditional delete of an unreadable value: %v %v", ok, err)
	}
	if ok, err := st.Delete(ctx, "y"); !ok || err != nil {
		t.Fatalf("a delete without a condition of an unreadable value: %v %v", ok, err)
	}
}

// After the queue Redis restarted empty with no replica's copy to put the
// store back, a schedule put again counts its versions from 1 again, but
// its ETag (version and created) is not one read before the restart: a
// conditional put with an ETag read before it matches nothing it did not
// read (Redis's clock does not go back across the restart here).
func TestAnETagReadBeforeAnEmptyRestartMatchesNothingAfterIt(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	st := New(rdb, "fs", nil, 1)
	ctx := context.Background()
	doc := func(s string) json.RawMessage {
		return json.RawMessage(`{"handler":{"name":"h"},"schedule":"` + s + `"}`)
	}
	var before Record
	for _, s := range []string{"@hourly", "@daily", "@weekly"} {
		r, err := st.Put(ctx, "x", doc(s), Any)
		if err != nil {
			t.Fatal(err)
		}
		before = r
	}
	if err := srv.Restart(); err != nil { // empty: no persistence
		t.Fatal(err)
	}
	for i := 0; i < 1e6 && rdb.Time(ctx).Val().UnixMilli() <= before.Created.UnixMilli(); i++ {
	}
	var after Record
	for _, s := range []string{"@hourly", "@daily", "@monthly"} {
		r, err := st.Put(ctx, "x", doc(s), Any)
		if err != nil {
			t.Fatal(err)
		}
		after = r
	}
	if after.Version != before.Version {
		t.Fatalf("versions %d and %d: the test wants the same version on both sides", before.Version, after.Version)
	}
	if _, err := st.Put(ctx, "x", doc("@yearly"), Match{Version: before.Version, Created: before.Created}); !errors.Is(err, ErrChanged) {
		t.Fatalf("a put over an ETag read before the restart: %v, want ErrChanged", err)
	}
}

// A conditional put or delete reads a stored value as Store.Get does, to
// its numbers' bounds and its definition's first byte: a value Get reads
// at version V created C is one a condition on V and C matches; one Get
// reports corrupt (a number past int64, a definition that is JSON but no
// object) matches no condition, and a put without one replaces it with a
// record Get reads, as the CorruptError says to do.
func TestConditionsReadAStoredValueToItsBoundsAsGetDoes(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	st := New(rdb, "fs", nil, 1)
	ctx := context.Background()
	defs := newKeys("fs", 0, 1).defs
	doc := `{"handler":{"name":"h"},"schedule":"@hourly"}`
	daily := json.RawMessage(`{"handler":{"name":"h"},"schedule":"@daily"}`)
	const past = "99999999999999999999" // past int64
	for _, v := range []string{
		"1700000000000|+5|3|2|123",                         // a definition that is a JSON number
		"1700000000000|+5|3|2|[" + doc + "]",               // ... or array
		past + "|+5|3|2|" + doc,                            // created past int64
		"1700000000000|+" + past + "|3|2|" + doc,           // updated
		"1700000000000|+5|" + past + "|2|" + doc,           // the change
		"1700000000000|+5|3|" + past + "|" + doc,           // the version
		"1700000000000|1700000000005|3|" + doc,             // the earlier head (version 1): read
		"9223372036854775807|+0|3|2|" + doc,                // int64's largest: read
		"1700000000000|+5|3|0009223372036854775807|" + doc, // leading zeros: read
	} {
		for _, op := range []string{"delete", "put"} {
			if err := rdb.HSet(ctx, defs, "x", v).Err(); err != nil {
				t.Fatal(err)
			}
			rec, readErr := st.Get(ctx, "x")
			change := func(m Match) error {
				if op == "delete" {
					_, _, err := st.DeleteIf(ctx, "x", m)
					return err
				}
				_, err := st.Put(ctx, "x", daily, m)
				return err
			}
			if readErr == nil {
				if err := change(Match{Version: rec.Version, Created: rec.Created}); err != nil {
					t.Errorf("%q, read as version %d created %d: a %s over what was read: %v", v, rec.Version, rec.Created.UnixMilli(), op, err)
				}
				continue
			}
			for _, m := range []Match{{Version: 0}, {Version: 1}, {Version: 2}} {
				if err := change(m); !errors.Is(err, ErrChanged) || !strings.Contains(err.Error(), "not a baton schedule record") {
					t.Errorf("%q, which Get reports corrupt (%v): a %s if version %d: %v, want ErrChanged naming a value that is no record", v, readErr, op, m.Version, err)
				}
			}
			if op == "put" {
				if _, err := st.Put(ctx, "x", daily, Any); err != nil {
					t.Fatalf("%q: a put without a condition: %v", v, err)
				}
				if r, err := st.Get(ctx, "x"); err != nil || string(r.Doc) != string(daily) || r.Version != 1 {
					t.Errorf("%q, which Get reports corrupt: put again without a condition, it reads %+v %v, want the put's definition at version 1", v, r, err)
				}
			}
		}
	}
}
