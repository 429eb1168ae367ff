package redisurl

import (
	"strings"
	"testing"
)

// A URL with "//host" gives the host, port, password and database written.
func TestParseReadsTheServerWritten(t *testing.T) {
	o, err := Parse("rediss://user:s3cret@cache.internal:6380/2?dial_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	if o.Addr != "cache.internal:6380" || o.Username != "user" || o.Password != "s3cret" || o.DB != 2 || o.TLSConfig == nil {
		t.Errorf("options %+v", o)
	}
	if o, err := Parse("redis://[::1]/0"); err != nil || o.Addr != "[::1]:6379" {
		t.Errorf("IPv6 literal: %v, %v", o, err)
	}
}

// URLs go-redis would read as another server (localhost:6379), or not
// read, are refused with a message that says what is wrong and holds no
// part of the URL.
func TestParseRefusesAURLWithoutHost(t *testing.T) {
	for raw, want := range map[string]string{
		"redis//:s3cret@host":         "no scheme",
		"redis:/:s3cret@host":         "no // after the scheme",
		"redis:s3cret@host":           "no // after the scheme",
		"redis:s3cret@host:6380/0":    "no // after the scheme",
		"rediss:s3cret@host":          "no // after the scheme",
		"redis://":                    "no host name",
		"redis:///0":                  "no host name",
		"redis://:s3cret@:6379/0":     "no host name",
		"http://:s3cret@host/0":       "scheme must be redis://",
		"redis://:s3cret@host/0/1":    "the path after host:port must be empty or /N",
		"redis://host/s3cret":         "the path after host:port must be empty or /N",
		"redis://:s3%zzcret@host/0":   `a "%" not followed by two hex digits`,
		"redis://:s3cret@h st:6379/0": "a character a host name cannot hold",
		"redis://:s3cret":             "a port that is not a number",
		"redis://user:s3cret/0":       "a port that is not a number",
	} {
		_, err := Parse(raw)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want an error saying %q", raw, err, want)
			continue
		}
		if strings.Contains(err.Error(), "s3") || strings.Contains(err.Error(), "cret") {
			t.Errorf("Parse(%q): the error %q shows part of the URL", raw, err)
		}
	}
}

// A client's connections get baton's smaller buffers.
func TestParseGivesConnectionsBatonsBuffers(t *testing.T) {
	o, err := Parse("redis://127.0.0.1:6379/0?dial_timeout=2s")
	if err != nil {
		t.Fatal(err)
	}
	if o.ReadBufferSize != BufferSize || o.WriteBufferSize != BufferSize {
		t.Errorf("buffers %d and %d, want %d", o.ReadBufferSize, o.WriteBufferSize, BufferSize)
	}
	if o.PipelineReadBufferSize != BufferSize || o.PipelineWriteBufferSize != BufferSize {
		t.Errorf("pipeline buffers %d and %d (go-redis's default: 128 KiB), want %d", o.PipelineReadBufferSize, o.PipelineWriteBufferSize, BufferSize)
	}
}
