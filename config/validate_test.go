package config_test

import (
	"net/url"
	"path"
	"strings"
	"testing"

	"github.com/batonhq/baton/config"
)

// A Redis URL without "//" before its host, which go-redis reads as
// localhost:6379 ("redis:pw@host:6380/0" passed validation and dialed
// 127.0.0.1:6379), is refused in redis.url and in locking.masters with an
// error naming the field and showing the URL with its password masked.
func TestRedisURLWithoutHostRefused(t *testing.T) {
	for _, raw := range []string{
		"redis//:s3cretpw@cache:6379",
		"redis:/:s3cretpw@cache:6379",
		"redis:s3cretpw@cache",
		"redis:s3cretpw@cache:6380/0",
		"redis://:s3cretpw@:6379/0",
	} {
		for _, field := range []string{"redis.url", "locking.masters[0]"} {
			y := "redis: {url: \"" + raw + "\"}\njobs: []\n"
			if field != "redis.url" {
				y = "redis: {url: \"redis://127.0.0.1:6379/0\"}\nlocking: {masters: [\"" + raw + "\"]}\njobs: []\n"
			}
			_, err := config.Load([]byte(y))
			if err == nil {
				t.Errorf("%s %q accepted", field, raw)
				continue
			}
			msg := err.Error()
			if !strings.Contains(msg, field+": invalid Redis URL \"") || !strings.Contains(msg, "xxxxx") || strings.Contains(msg, "s3cretpw") {
				t.Errorf("%s %q: %s\nwant the field named and the URL shown with its password masked", field, raw, msg)
			}
		}
	}
}

// A job name is a URL path segment as it is (the HTTP API's
// /api/jobs/NAME/history): "." and "..", which a URL path resolves away,
// are refused naming the job's field and why; every name of the allowed
// set survives escaping and path cleaning unchanged.
func TestJobNamesSurviveAURLPath(t *testing.T) {
	for _, name := range []string{".", ".."} {
		_, err := config.Load([]byte("redis: {url: \"redis://127.0.0.1:6379/0\"}\njobs:\n  - name: \"" + name + "\"\n    schedule: \"@hourly\"\n    exec: {command: [\"true\"]}\n"))
		if err == nil || !strings.Contains(err.Error(), `<input>:3: job "`+name+`": name: invalid name "`+name+`": a URL path cannot carry it`) {
			t.Errorf("name %q: %v", name, err)
		}
	}
	alphabet := "abcdefghijklmnopqrstuvwxyz0123456789._-"
	names := []string{"...", "a..b", "...a"}
	for _, a := range alphabet {
		for _, b := range alphabet {
			names = append(names, string(a)+string(b))
		}
	}
	var y strings.Builder
	y.WriteString("redis: {url: \"redis://127.0.0.1:6379/0\"}\njobs:\n")
	for _, name := range names {
		if name != "." && name != ".." {
			y.WriteString("  - {name: \"" + name + "\", schedule: \"@hourly\", exec: {command: [\"true\"]}}\n")
		}
	}
	cfg, err := config.Load([]byte(y.String()))
	if err != nil {
		t.Fatalf("names of the allowed set refused: %v", err)
	}
	for _, j := range cfg.Jobs {
		p := "/api/jobs/" + url.PathEscape(j.Name) + "/history"
		if path.Clean(p) != p || p != "/api/jobs/"+j.Name+"/history" {
			t.Errorf("name %q accepted, but its URL path %q does not survive (cleaned: %q)", j.Name, p, path.Clean(p))
		}
	}
}
