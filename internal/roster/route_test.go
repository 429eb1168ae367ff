package roster

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/config"
)

// A roster entry publishes the Go handlers and the digests of the URL
// prefixes its replica runs runtime schedules with, as fields an older
// version ignores; an older entry, without them, runs none.
func TestRosterEntryPublishesHandlersAndPrefixDigests(t *testing.T) {
	m := Member{Version: "v2", Role: "run", Queues: []string{"default"}, Hash: "h",
		Handlers: []string{"report"}, HTTPPrefixes: PrefixDigests([]string{"https://hooks.example/t/"})}
	b, err := json.Marshal(rosterEntry{V: 2, Member: m})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "hooks.example") {
		t.Errorf("the entry shows a prefix: %s", b)
	}
	var older struct {
		Version string   `json:"version"`
		Queues  []string `json:"queues"`
	}
	if err := json.Unmarshal(b, &older); err != nil || older.Version != "v2" {
		t.Fatalf("an older version reads %+v, %v", older, err)
	}
	var back Member
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	task := Task{Job: "@r/1", Handler: "report"}
	if !Runs(&back, task, "default") || Runs(&back, task, "other") {
		t.Errorf("Runs of %+v: want on its queue only", back)
	}
	if !Runs(&back, Task{Job: "@r/2", URL: "https://HOOKS.example/t/42?x=1"}, "default") {
		t.Errorf("a URL under its prefix is not run")
	}
	var old Member
	if err := json.Unmarshal([]byte(`{"version":"v1","role":"run","queues":["default"],"hash":"h"}`), &old); err != nil {
		t.Fatal(err)
	}
	if Runs(&old, task, "default") || Runs(&old, Task{Job: "@r/2", URL: "https://hooks.example/t/42"}, "default") {
		t.Errorf("an older entry runs a runtime schedule")
	}
}

// AllowsURL, on the digests of a replica's prefixes, allows exactly the
// URLs its config allows a runtime schedule to call.
func TestAllowsURLAgreesWithTheConfig(t *testing.T) {
	prefixes := []string{"https://hooks.example/tenants/", "http://Other.example:8080/api", "https://root.example"}
	cfg, err := config.Load(fmt.Appendf(nil, "redis: {url: \"redis://127.0.0.1:1/0\"}\nschedules: {http_prefixes: [%s]}\njobs: []\n",
		strings.Join(prefixes, ", ")))
	if err != nil {
		t.Fatal(err)
	}
	digests := PrefixDigests(prefixes)
	for _, u := range []string{
		"https://hooks.example/tenants/42", "https://hooks.example/tenants/", "https://hooks.example/tenants",
		"https://hooks.example/tenantsx/1", "https://HOOKS.EXAMPLE/tenants/42/report?token=x", "http://hooks.example/tenants/42",
		"https://hooks.example/other", "https://hooks.example/tenants/../admin", "https://hooks.example/tenants/a%2Fb",
		"http://other.example:8080/api", "http://other.example:8080/api/v1", "http://other.example:8080/apix",
		"http://other.example/api", "https://root.example/", "https://root.example/any/path", "https://root.example",
		"https://user@hooks.example/tenants/1", "https://evil.example/tenants/1",
	} {
		_, err := config.DecodeSchedule(cfg, "x", fmt.Appendf(nil, `{schedule: "@every 1m", http: {url: %q}}`, u), time.Time{})
		if got, want := AllowsURL(digests, u), err == nil; got != want {
			t.Errorf("%s: AllowsURL %v, the config %v (%v)", u, got, want, err)
		}
	}
}
