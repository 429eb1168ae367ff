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
