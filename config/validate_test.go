package config_test

import (
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
