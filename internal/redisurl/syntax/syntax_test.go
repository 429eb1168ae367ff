package syntax

import (
	"strings"
	"testing"
)

func TestCheckReadsTheServerWritten(t *testing.T) {
	for raw, want := range map[string]Target{
		"rediss://user:s3cret@cache.internal:6380/2?dial_timeout=2": {Addr: "cache.internal:6380", DB: 2, TLS: true},
		"redis://[::1]/0":                {Addr: "[::1]:6379"},
		"redis://host":                   {Addr: "host:6379"},
		"redis://host:7000/3?db=5":       {Addr: "host:7000", DB: 5},
		"redis://host/3?db=":             {Addr: "host:6379", DB: 3},
		"redis://host?pool_fifo=&db=1":   {Addr: "host:6379", DB: 1},
		"rediss://host?skip_verify=true": {Addr: "host:6379", TLS: true},
	} {
		got, err := Check(raw)
		if err != nil || got != want {
			t.Errorf("Check(%q) = %+v, %v; want %+v", raw, got, err, want)
		}
	}
}

// Each refusal says what is wrong and shows no part of the URL, which
// may hold a password.
func TestCheckRefusesWhatWouldDialAnotherServerOrFail(t *testing.T) {
	for raw, want := range map[string]string{
		"redis//:s3cret@host":                                "no scheme",
		"redis:/:s3cret@host":                                "no // after the scheme",
		"redis:s3cret@host:6380/0":                           "no // after the scheme",
		"redis://":                                           "no host name",
		"redis://:s3cret@:6379/0":                            "no host name",
		"http://:s3cret@host/0":                              "scheme must be redis://",
		"redis://:s3cret@host/0/1":                           "the path after host:port must be empty or /N",
		"redis://host/s3cret":                                "the path after host:port must be empty or /N",
		"redis://host/99999999999999999999999":               "out of range",
		"redis://:s3%zzcret@host/0":                          `a "%" not followed by two hex digits`,
		"redis://:s3cret@h st:6379/0":                        "a character a host name cannot hold",
		"redis://user:s3cret/0":                              "a port that is not a number",
		"redis://host/0?passwrd=s3cret":                      `unknown option "passwrd"`,
		"redis://host/0?dial_timeout=s3cret":                 `option "dial_timeout": want seconds`,
		"redis://host/0?pool_size=s3cret":                    `option "pool_size": want an integer`,
		"redis://host/0?db=s3cret":                           `option "db": want an integer`,
		"redis://host/0?pool_fifo=s3cret":                    `option "pool_fifo": want true, false`,
		"redis://host/0?skip_verify=true":                    "for rediss:// (TLS) only",
		"redis://host/0?idle_timeout=1&conn_max_idle_time=2": "are one option",
		"redis://host/0?pool_size=1;s3cret=2":                `a ";" in the query`,
		"redis://host/0?pool_size=%zz":                       `a "%" not followed by two hex digits`,
	} {
		_, err := Check(raw)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Check(%q) = %v, want an error saying %q", raw, err, want)
			continue
		}
		if strings.Contains(err.Error(), "s3") || strings.Contains(err.Error(), "cret") || strings.Contains(err.Error(), "zz") {
			t.Errorf("Check(%q): the error %q shows part of the URL", raw, err)
		}
	}
}

// A bracketed host that is no IPv6 address is refused without quoting
// it: url.Parse's error quotes what is between the brackets
// (ParseAddr("...")), which may be a password typed where the host goes.
func TestCheckRefusesABadIPLiteralWithoutShowingIt(t *testing.T) {
	for _, raw := range []string{"redis://[s3cret]/0", "redis://:pw@[s3cret]:6379/0"} {
		_, err := Check(raw)
		if err == nil {
			t.Errorf("Check(%q) accepts it", raw)
		} else if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Check(%q): the error %q shows part of the URL", raw, err)
		}
	}
}
