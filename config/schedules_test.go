package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/config"
)

// schedulesBase is a config whose runtime schedules may call URLs under
// https://hooks.example/tenants/ only.
func schedulesBase(t *testing.T) *config.Config {
	t.Helper()
	cfg, err := config.Load([]byte(`redis: {url: "redis://127.0.0.1:1/0"}
schedules: {http_prefixes: ["https://hooks.example/tenants/"]}
jobs: []
`))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// A runtime schedule cannot name the Host its request is sent with: the
// request would reach another site served at the allowed host's address
// (a proxy routes by the Host it is given), outside schedules.http_prefixes.
func TestRuntimeHTTPScheduleCannotSetTheHostHeader(t *testing.T) {
	base := schedulesBase(t)
	for _, name := range []string{"Host", "host", "HOST"} {
		doc := `{schedule: "@hourly", http: {url: "https://hooks.example/tenants/42", headers: {` + name + `: admin.internal}}}`
		_, err := config.DecodeSchedule(base, "t/42", []byte(doc), time.Time{})
		if err == nil || !strings.Contains(err.Error(), "http.headers."+name) || !strings.Contains(err.Error(), "Host") {
			t.Errorf("header %s: %v", name, err)
		}
	}
	if _, err := config.DecodeSchedule(base, "t/42", []byte(`{schedule: "@hourly", http: {url: "https://hooks.example/tenants/42", headers: {X-Tenant: "42"}}}`), time.Time{}); err != nil {
		t.Errorf("another header: %v", err)
	}
}

// A runtime schedule whose lock_ttl (set, or the default) is longer than
// locking.restart_quarantine is refused at put, naming both: no run of it
// could take its execution lease. The job list's rule, which the list
// checks when it loads.
func TestRuntimeScheduleLongerThanTheRestartQuarantineIsRefused(t *testing.T) {
	base, err := config.Load([]byte(`redis: {url: "redis://127.0.0.1:1/0"}
locking: {restart_quarantine: 12s}
jobs:
  - {name: short, schedule: "@hourly", lock_ttl: 10s, handler: {name: h}}
`))
	if err != nil {
		t.Fatal(err)
	}
	for doc, want := range map[string]string{
		`{schedule: "@hourly", handler: {name: h}}`:                "30s (the default) is longer than locking.restart_quarantine 12s",
		`{schedule: "@hourly", lock_ttl: 20s, handler: {name: h}}`: "20s is longer than locking.restart_quarantine 12s",
	} {
		_, err := config.DecodeSchedule(base, "t/1", []byte(doc), time.Time{})
		if err == nil || !strings.Contains(err.Error(), "lock_ttl") || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "set lock_ttl to 12s or less") {
			t.Errorf("%s: %v, want %q", doc, err, want)
		}
	}
	if _, err := config.DecodeSchedule(base, "t/1", []byte(`{schedule: "@hourly", lock_ttl: 12s, handler: {name: h}}`), time.Time{}); err != nil {
		t.Errorf("lock_ttl equal to the quarantine: %v", err)
	}
}

// A runtime schedule's URL lies under an allowed prefix, whatever way it
// is spelled to leave it.
func TestRuntimeHTTPScheduleURLStaysUnderTheAllowedPrefixes(t *testing.T) {
	base := schedulesBase(t)
	for _, u := range []string{
		"https://hooks.example/tenants",
		"https://hooks.example/tenantsX/1",
		"https://hooks.example/tenants/../admin",
		"https://hooks.example/tenants/%2e%2e/admin",
		"https://hooks.example/tenants/%2E%2E%2Fadmin",
		"https://hooks.example/tenants/..%5cadmin",
		`https://hooks.example/tenants/..\admin`,
		"https://user:pw@hooks.example/tenants/1",
		"https://hooks.example@evil.example/tenants/1",
		"https://hooks.example.evil.example/tenants/1",
		"https://hooks.example:8443/tenants/1",
		"https://hooks.example./tenants/1",
		"http://hooks.example/tenants/1",
		"https://[::1]/tenants/1",
		"https:hooks.example/tenants/1",
		"//hooks.example/tenants/1",
		"https://hooks.examplе/tenants/1", // a Cyrillic e
		"https://hooks.eKample/tenants/1", // the Kelvin sign folds to k
		"https://hooks.example/tenants/..;/admin",
		"https://hooks.example/tenants/.;x/admin",
		"https://hooks.example/tenants/%252e%252e/admin",
	} {
		doc := `{schedule: "@hourly", http: {url: "` + strings.ReplaceAll(u, `\`, `\\`) + `"}}`
		if _, err := config.DecodeSchedule(base, "t/1", []byte(doc), time.Time{}); err == nil {
			t.Errorf("%s: allowed", u)
		}
	}
	for _, u := range []string{"https://hooks.example/tenants/1", "https://HOOKS.example/tenants/1/report?x=1"} {
		doc := `{schedule: "@hourly", http: {url: "` + u + `"}}`
		if _, err := config.DecodeSchedule(base, "t/1", []byte(doc), time.Time{}); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
}

// A definition the put path accepts (DecodeSchedule on the user's
// document, then ScheduleDocument for the stored form) is one every replica
// accepts when it reads the stored form back: a raw DEL (U+007F) in the
// body, and an '&' in the URL, which the stored form escapes as \u0026.
func TestAStoredDefinitionIsReadAsItWasAccepted(t *testing.T) {
	base := schedulesBase(t)
	user := []byte("{\"schedule\":\"@hourly\",\"http\":{\"url\":\"https://hooks.example/tenants/42?a=1&b=2\",\"body\":\"x\x7fy\"}}")
	if _, err := config.DecodeSchedule(base, "t/42", user, time.Time{}); err != nil {
		return // refused at the put: consistent
	}
	stored, err := config.ScheduleDocument(user)
	if err != nil {
		t.Fatalf("accepted by DecodeSchedule, but ScheduleDocument: %v", err)
	}
	if _, err := config.DecodeSchedule(base, "t/42", stored, time.Time{}); err != nil {
		t.Fatalf("the put accepts %q and stores %q, which every replica refuses: %v", user, stored, err)
	}
}

// A number's meaning does not depend on whether some other string of the
// definition holds an escape: 1e400 (out of float64's range) is the same
// with and without a "\u0041" elsewhere in the document.
func TestANumberDecodesTheSameWithOrWithoutAnEscapeElsewhere(t *testing.T) {
	plain := []byte(`{"schedule":"@hourly","handler":{"name":"h","payload":{"n":1e400,"s":"A"}}}`)
	escaped := []byte(`{"schedule":"@hourly","handler":{"name":"h","payload":{"n":1e400,"s":"\u0041"}}}`)
	a, errA := config.ScheduleDocument(plain)
	b, errB := config.ScheduleDocument(escaped)
	if string(a) != string(b) || (errA == nil) != (errB == nil) {
		t.Fatalf("the same definition stored two ways: without an escape %s (err %v), with one %s (err %v)", a, errA, b, errB)
	}
}

// A replica runs the body the put accepted: a raw NEL (U+0085) in a JSON
// string, in a definition whose stored form holds a backslash (the '&' of
// its URL escaped).
func TestAStoredDefinitionsBodyIsTheBodyPut(t *testing.T) {
	base := schedulesBase(t)
	user := []byte("{\"schedule\":\"@hourly\",\"http\":{\"method\":\"POST\",\"url\":\"https://hooks.example/tenants/42?a=1&b=2\",\"body\":\"x\u0085y\"}}")
	put, err := config.DecodeSchedule(base, "t/42", user, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	stored, err := config.ScheduleDocument(user)
	if err != nil {
		t.Fatal(err)
	}
	run, err := config.DecodeSchedule(base, "t/42", stored, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if put.HTTP.Body != run.HTTP.Body {
		t.Fatalf("body %q at the put, %q as replicas read the stored %q", put.HTTP.Body, run.HTTP.Body, stored)
	}
}

// A host is compared as ASCII only: "localhoſt" (a long s, which Unicode
// case folding takes for "s") is not "localhost", and is refused (the
// request would go to its xn-- form); a prefix's host must be ASCII too.
func TestRuntimeHTTPScheduleHostComparedAsASCII(t *testing.T) {
	base, err := config.Load([]byte(`redis: {url: "redis://127.0.0.1:1/0"}
schedules: {http_prefixes: ["http://localhost:8080/hooks/"]}
jobs: []
`))
	if err != nil {
		t.Fatal(err)
	}
	doc := `{schedule: "@hourly", http: {url: "http://localho` + "\u017f" + `t:8080/hooks/1"}}`
	if _, err := config.DecodeSchedule(base, "t/1", []byte(doc), time.Time{}); err == nil || !strings.Contains(err.Error(), "must be ASCII") {
		t.Errorf("a long s in the host: %v", err)
	}
	_, err = config.Load([]byte("redis: {url: \"redis://127.0.0.1:1/0\"}\nschedules: {http_prefixes: [\"https://b\u00fccher.example/\"]}\njobs: []\n"))
	if err == nil || !strings.Contains(err.Error(), "schedules.http_prefixes[0]") || !strings.Contains(err.Error(), "xn--") {
		t.Errorf("a non-ASCII prefix host: %v", err)
	}
}

// A header value with a control character (CR, LF, ...) is refused where
// it is written, in a runtime schedule's put and in the job list, without
// quoting the value: every run of it would fail.
func TestHTTPHeaderValueWithAControlCharacterIsRefused(t *testing.T) {
	base := schedulesBase(t)
	doc := `{schedule: "@hourly", http: {url: "https://hooks.example/tenants/1", headers: {X-Tenant: "1\r\nX-Admin: yes"}}}`
	if _, err := config.DecodeSchedule(base, "t/1", []byte(doc), time.Time{}); err == nil || !strings.Contains(err.Error(), "http.headers.X-Tenant") ||
		!strings.Contains(err.Error(), "control character") || strings.Contains(err.Error(), "X-Admin") {
		t.Errorf("a runtime schedule's header with CR LF: %v", err)
	}
	_, err := config.Load([]byte(`redis: {url: "redis://127.0.0.1:1/0"}
jobs:
  - {name: j, schedule: "@hourly", http: {url: "https://a.example/", headers: {X-A: "a\nb"}}}
`))
	if err == nil || !strings.Contains(err.Error(), "http.headers.X-A") || !strings.Contains(err.Error(), "control character") {
		t.Errorf("a job list header with LF: %v", err)
	}
}

// A runtime schedule may name a limit of the job list; one the list does
// not define is refused at put, naming the limits there are.
func TestRuntimeScheduleNamesALimitOfTheJobList(t *testing.T) {
	base, err := config.Load([]byte(`redis: {url: "redis://127.0.0.1:1/0"}
limits: {warehouse: 2}
jobs: []
`))
	if err != nil {
		t.Fatal(err)
	}
	j, err := config.DecodeSchedule(base, "t/1", []byte(`{schedule: "@hourly", limit: warehouse, handler: {name: h}}`), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if name, n := base.LimitOf(j); name != "warehouse" || n != 2 {
		t.Errorf("LimitOf = %q, %d", name, n)
	}
	_, err = config.DecodeSchedule(base, "t/1", []byte(`{schedule: "@hourly", limit: lake, handler: {name: h}}`), time.Time{})
	if err == nil || !strings.Contains(err.Error(), `limit: no limit "lake": the limits are warehouse`) {
		t.Errorf("an unknown limit: %v", err)
	}
}

// A runtime schedule cannot chain yet: after is refused at put, saying
// where chains are written.
func TestRuntimeScheduleCannotChainYet(t *testing.T) {
	base := schedulesBase(t)
	_, err := config.DecodeSchedule(base, "t/1", []byte(`{after: [extract], handler: {name: h}}`), time.Time{})
	if err == nil || !strings.Contains(err.Error(), "after: not in a runtime schedule yet") {
		t.Errorf("a runtime schedule with after: %v", err)
	}
}
