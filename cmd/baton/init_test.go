package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/redistest"
)

// baton init --redis on a brand-new server: baton lock obtains its lock at
// once (no restart quarantine); a second baton init refuses, naming the
// master, and exits 1.
func TestInitLetsBatonLockRunAtOnceAndRefusesTwice(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	if code, out, errs := runIn("init", "--redis", redisURL(srv)); code != 0 || !strings.Contains(out, "marked") {
		t.Fatalf("baton init: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	start := time.Now()
	if code, errs := runBaton(t, 30*time.Second, nil, "lock", "--redis", redisURL(srv), "nightly", "--", "true"); code != 0 {
		t.Fatalf("baton lock after baton init: exit %d: %s", code, errs)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("baton lock took %v after baton init", d)
	}
	code, _, errs := runIn("init", "--redis", redisURL(srv))
	if code != 1 || !strings.Contains(errs, "master 0 ("+srv.Addr()+") carries a marker") {
		t.Fatalf("second baton init: exit %d, stderr %q; want 1 naming master 0", code, errs)
	}
}

// baton init --config marks the config's masters under its namespace; a
// master already in use is named in the refusal, and nothing is marked.
func TestInitWithConfigRefusesMasterInUse(t *testing.T) {
	t.Parallel()
	servers := redistest.NewN(t, 3)
	yml := fmt.Sprintf(`redis: {url: %q}
namespace: shop
locking:
  masters: [%q, %q, %q]
jobs:
  - name: a
    schedule: "@hourly"
    exec: {command: ["true"]}
`, redisURL(servers[0]), redisURL(servers[0]), redisURL(servers[1]), redisURL(servers[2]))
	path := writeConfig(t, yml)
	// master 1 is in use: a lock under the config's namespace marked it
	c := servers[1].TestClient(t)
	if err := c.Set(t.Context(), "shop:lock:marker", "x 1 1 empty", 0).Err(); err != nil {
		t.Fatal(err)
	}
	code, _, errs := runIn("init", "--config", path)
	if code != 1 || !strings.Contains(errs, "master 1 ("+servers[1].Addr()+") carries") || strings.Contains(errs, "master 0 (") {
		t.Fatalf("baton init: exit %d, stderr %q; want 1 naming master 1 alone", code, errs)
	}
	if n := servers[0].TestClient(t).Exists(t.Context(), "shop:lock:marker").Val(); n != 0 {
		t.Fatal("baton init refused but marked master 0")
	}
	c.Del(t.Context(), "shop:lock:marker")
	if code, _, errs := runIn("init", "--config", path); code != 0 {
		t.Fatalf("baton init on brand-new masters: exit %d: %s", code, errs)
	}
}
