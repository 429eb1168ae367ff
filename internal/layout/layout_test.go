package layout

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/keytable"
	"github.com/batonhq/baton/internal/redistest"
)

// The key table in docs/operating.md lists exactly the keys keys.go builds.
func TestKeyTableMatchesKeyBuilders(t *testing.T) {
	keytable.Check(t, "../../docs/operating.md", "internal/layout", strings.NewReplacer("NS", "ns"), []string{Key("ns"), lockKey("ns")})
}

func load(t *testing.T, extra string) *config.Config {
	t.Helper()
	cfg, err := config.Load([]byte("redis: {url: \"redis://127.0.0.1:1/0\"}\nnamespace: ly\n" + extra))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// A namespace without a record has the one-shard, one-lane layout every
// release before layouts used: a config at the defaults runs, one that
// says otherwise is refused until baton init records it.
func TestNoRecordIsTheDefaultLayout(t *testing.T) {
	rdb := redistest.New(t).TestClient(t)
	ctx := context.Background()
	if err := Check(ctx, rdb, load(t, "")); err != nil {
		t.Fatal(err)
	}
	err := Check(ctx, rdb, load(t, "schedules: {shards: 16}\n"))
	if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "schedules.shards 16") || !strings.Contains(err.Error(), "baton init") {
		t.Fatalf("got %v", err)
	}
	if err := Write(ctx, rdb, "ly", Layout{Shards: 16, Lanes: 1}); err != nil {
		t.Fatal(err)
	}
	if err := Check(ctx, rdb, load(t, "schedules: {shards: 16}\n")); err != nil {
		t.Fatal(err)
	}
}

// A record that is not a layout (edited by hand, another program's key)
// is an error naming the key and the field, never taken as a layout.
func TestCorruptRecordIsNamed(t *testing.T) {
	rdb := redistest.New(t).TestClient(t)
	ctx := context.Background()
	rdb.HSet(ctx, Key("ly"), "shards", "sixteen", "lanes", "1")
	_, err := Read(ctx, rdb, "ly")
	if err == nil || !strings.Contains(err.Error(), "ly:layout") || !strings.Contains(err.Error(), `"shards"`) {
		t.Fatalf("got %v", err)
	}
	rdb.HSet(ctx, Key("ly"), "shards", "0")
	if _, err := Read(ctx, rdb, "ly"); err == nil {
		t.Fatal("shards 0 read as a layout")
	}
}
