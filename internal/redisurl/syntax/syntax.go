// Package syntax checks a redis:// or rediss:// URL as baton reads it,
// without go-redis: the config package checks every URL of a job list with
// it, and a program that imports only config and jobs links no Redis
// client. internal/redisurl reads a URL into go-redis options after this
// check and holds the two together: a test there feeds both the same URLs.
//
// It refuses what go-redis would read as another server than the one
// written (go-redis takes a URL without "//" before its host,
// "redis:pw@host:6380/0", as localhost:6379) and every query option
// go-redis would refuse. Its errors say what is wrong and hold no part of
// the URL, which may hold a password: callers name the URL, masked with
// redact.URL.
package syntax

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Form is how a Redis URL is written, for messages.
const Form = "redis://[[user]:password@]host[:port][/db] (rediss:// for TLS)"

// Target is the server and database a URL names.
type Target struct {
	Addr string // host:port, the port 6379 when the URL has none
	DB   int
	TLS  bool // rediss://
}

// Check returns the Target of a redis:// or rediss:// URL with a host. It
// refuses a URL without a scheme, with another scheme, without "//host"
// after the scheme or with an empty host name, a path other than a
// database number, and a query option go-redis does not read or whose
// value it cannot.
func Check(raw string) (Target, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return Target{}, fmt.Errorf("invalid URL: %s", describe(err))
	}
	switch {
	case u.Scheme == "":
		return Target{}, fmt.Errorf("no scheme: write %s", Form)
	case u.Scheme != "redis" && u.Scheme != "rediss":
		return Target{}, fmt.Errorf("scheme must be redis:// or rediss:// (TLS), got %q", u.Scheme+"://")
	case u.Opaque != "" || !strings.HasPrefix(raw[len(u.Scheme)+1:], "//"):
		return Target{}, fmt.Errorf("no // after the scheme: go-redis would read it as localhost:6379; write %s", Form)
	case u.Hostname() == "":
		return Target{}, fmt.Errorf("no host name: go-redis would dial localhost; write %s", Form)
	}
	t := Target{TLS: u.Scheme == "rediss"}
	port := u.Port()
	if port == "" {
		port = "6379"
	}
	t.Addr = net.JoinHostPort(u.Hostname(), port)
	switch segs := strings.FieldsFunc(u.Path, func(r rune) bool { return r == '/' }); {
	case len(segs) > 1 || len(segs) == 1 && strings.Trim(segs[0], "0123456789") != "":
		return Target{}, errors.New("the path after host:port must be empty or /N, a database number")
	case len(segs) == 1:
		if t.DB, err = strconv.Atoi(segs[0]); err != nil {
			return Target{}, errors.New("the database number after host:port is out of range")
		}
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return Target{}, fmt.Errorf("invalid URL: %s", describe(err))
	}
	if err := checkOptions(q, &t); err != nil {
		return Target{}, fmt.Errorf("invalid URL: %w", err)
	}
	return t, nil
}

// kind is how go-redis reads a query option's value.
type kind int

const (
	text     kind = iota // any
	number               // an integer
	duration             // seconds as an integer, or a Go duration (2s)
	boolean              // true, false, 1, 0 or empty
)

// options are the query options go-redis reads (v9: setupConnParams). An
// empty value reads as none; the last of repeated values counts.
var options = map[string]kind{
	"db": number, "protocol": number, "client_name": text,
	"max_retries": number, "min_retry_backoff": duration, "max_retry_backoff": duration,
	"dial_timeout": duration, "read_timeout": duration, "write_timeout": duration,
	"pool_fifo": boolean, "pool_size": number, "pool_timeout": duration,
	"min_idle_conns": number, "max_idle_conns": number, "max_active_conns": number,
	"max_concurrent_dials": number, "pipeline_pool_size": number,
	"pipeline_read_buffer_size": number, "pipeline_write_buffer_size": number,
	"conn_max_idle_time": duration, "idle_timeout": duration,
	"conn_max_lifetime": duration, "max_conn_age": duration,
	"conn_max_lifetime_jitter": duration, "skip_verify": boolean,
}

// aliases are older names of an option: go-redis reads the alias only
// when the option is absent, so a URL with both is refused.
var aliases = map[string]string{"idle_timeout": "conn_max_idle_time", "max_conn_age": "conn_max_lifetime"}

func checkOptions(q url.Values, t *Target) error {
	names := make([]string, 0, len(q))
	for name := range q {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		k, known := options[name]
		switch {
		case !known:
			return fmt.Errorf("unknown option %q", name)
		case name == "skip_verify" && !t.TLS:
			return errors.New(`option "skip_verify" is for rediss:// (TLS) only`)
		case aliases[name] != "" && q.Has(aliases[name]):
			return fmt.Errorf("options %q and %q are one option: keep %q", name, aliases[name], aliases[name])
		}
		v := q[name][len(q[name])-1]
		if v == "" {
			continue
		}
		if err := checkValue(k, v); err != nil {
			return fmt.Errorf("option %q: %s", name, err)
		}
		if name == "db" {
			t.DB, _ = strconv.Atoi(v)
		}
	}
	return nil
}

func checkValue(k kind, v string) error {
	switch k {
	case number:
		if _, err := strconv.Atoi(v); err != nil {
			return errors.New("want an integer")
		}
	case duration:
		if _, err := strconv.Atoi(v); err == nil {
			return nil
		}
		if _, err := time.ParseDuration(v); err != nil {
			return errors.New("want seconds (2) or a duration (2s, 500ms)")
		}
	case boolean:
		if v != "true" && v != "false" && v != "1" && v != "0" {
			return errors.New("want true, false, 1 or 0")
		}
	}
	return nil
}

func describe(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var ee url.EscapeError
	if errors.As(err, &ee) {
		return `a "%" not followed by two hex digits (write %25 for a literal %)`
	}
	if strings.HasPrefix(err.Error(), "invalid port ") {
		return "a port that is not a number (a password without @host after it?)"
	}
	var he url.InvalidHostError
	if errors.As(err, &he) {
		return "a character a host name cannot hold"
	}
	if strings.Contains(err.Error(), "semicolon") {
		return `a ";" in the query (separate options with "&")`
	}
	if strings.Contains(err.Error(), "invalid host") || strings.Contains(err.Error(), "IP-literal") {
		return "a host name or an IPv6 literal that cannot be read"
	}
	// url.Parse's other errors may quote the URL: say only that it is not one
	return "not a URL that can be read"
}
