package schedstore

import (
	"context"
	"fmt"
	"testing"

	"github.com/batonhq/baton/internal/redistest"
)

func TestZZProbe2(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	cfg := testConfig(t, "")
	st := Of(rdb, cfg)
	ctx := context.Background()
	put(t, st, "other", `{schedule: "@hourly", handler: {name: h}}`)
	snap := takeSnapshot(t, rdb, newKeys("fs", 0, 1))
	put(t, st, "x", `{schedule: "@weekly", handler: {name: h}}`)
	sf := newStillFollower(t, st, cfg)
	snap.bringBack(t, rdb)
	sf.f.beforeBatch = func() {
		sf.f.beforeBatch = nil
		ok, err := st.Delete(ctx, "x")
		fmt.Println("delete during restore:", ok, err)
	}
	sf.read(t)
	fmt.Println("after restore:", docOf(t, st, "x"), sf.got)
}

func TestZZProbe3(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	st := New(rdb, "fs", nil, 1)
	ctx := context.Background()
	defs := newKeys("fs", 0, 1).defs
	rdb.HSet(ctx, defs, "x", "99999999999999999999|+0|1|2|{\"handler\":{\"name\":\"h\"},\"schedule\":\"@hourly\"}")
	_, err := st.Get(ctx, "x")
	fmt.Println("get:", err)
	r, err := st.Put(ctx, "x", []byte(`{"handler":{"name":"h"},"schedule":"@daily"}`), Any)
	fmt.Println("put:", r, err)
	_, err = st.Get(ctx, "x")
	fmt.Println("get after put:", err, rdb.HGet(ctx, defs, "x").Val())
}
