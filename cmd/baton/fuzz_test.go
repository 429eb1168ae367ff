package main

import (
	"io"
	"strings"
	"testing"
)

// FuzzParseLock: any argument list after a --redis URL with a password is
// parsed or refused with a message (never a panic), a parse gives a usable
// command line, and the password never appears in a message unless the
// fuzzed arguments themselves carry it.
func FuzzParseLock(f *testing.F) {
	for _, s := range []string{
		"job -- true", "--ttl 5s --wait 1m job -- sh -c x", "--max 3 --fair k -- true", "--shared k -- true",
		"--exclusive --shared k -- true", "--ttl -1s k -- true", "k", "-- true", "k --", "--max 0 k -- true",
		"--inherit-env APP_* k -- env", "--redis redis://[::1]:1 k -- true", "--config /nonexistent k -- true",
		"exec:JOB -- true", "--grace x k -- true", "k --wait 2s -- true", "--prefix  k -- true",
	} {
		f.Add(strings.ReplaceAll(s, " ", "\x00"))
	}
	f.Fuzz(func(t *testing.T, s string) {
		args := append([]string{"--redis", "redis://user:hunter2@127.0.0.1:1/0"}, strings.Split(s, "\x00")...)
		cfg, help, err := parseLock(args, io.Discard)
		if help {
			return
		}
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an empty error")
			}
			if !strings.Contains(s, "hunter2") && strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("the password is in the message: %v", err)
			}
			return
		}
		if cfg.key == "" || len(cfg.argv) == 0 || cfg.argv[0] == "" || cfg.ttl <= 0 || cfg.max < 1 || len(cfg.masters) == 0 {
			t.Fatalf("parsed %q into an unusable command line: %+v", s, cfg)
		}
	})
}
