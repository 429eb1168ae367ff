package config_test

import (
	"strings"
	"testing"

	"github.com/batonhq/baton/config"
)

// An error about a value that came from ${VAR} does not print it, nor a
// piece of it quoted by a parser (a port, a field of a schedule, the
// password of a Redis URL typo, the user and host of a URL with another
// scheme).
func TestConfigErrorsMaskPiecesOfVarValues(t *testing.T) {
	t.Setenv("BATON_T_REDIS", "redis:/:pw-51d0e8@cache:6379")
	t.Setenv("BATON_T_MASTER", "redis://:pw-9c2e11@cache:6379/pw-9c2e11")
	t.Setenv("BATON_T_LISTEN", "127.0.0.1:ab")
	t.Setenv("BATON_T_HOOK", "https://:hk-77aa@api.example:hk-77aa/x")
	t.Setenv("BATON_T_SCHED", "0 0 * * * xyzday")
	t.Setenv("BATON_T_ZONE", "Europe/Secretville")
	t.Setenv("BATON_T_FTP", "ftp://us-3f1a:pw-77bb@hooks-5e.example/")
	t.Setenv("BATON_T_NOHOST", "https:/path-4c2d")
	_, err := config.Load([]byte(`redis: {url: "${BATON_T_REDIS}"}
locking: {masters: ["${BATON_T_MASTER}"]}
http: {listen: "${BATON_T_LISTEN}"}
jobs:
  - name: hook
    schedule: "${BATON_T_SCHED}"
    timezone: "${BATON_T_ZONE}"
    http: {url: "${BATON_T_HOOK}"}
  - name: ftp
    schedule: "@every 1m"
    http: {url: "${BATON_T_FTP}"}
  - name: nohost
    schedule: "@every 1m"
    http: {url: "${BATON_T_NOHOST}"}
`))
	if err == nil {
		t.Fatal("accepted")
	}
	msg := err.Error()
	for _, piece := range []string{"pw-51d0e8", "pw-9c2e11", `"ab"`, "hk-77aa", "xyzday", "Secretville", "cache",
		"us-3f1a", "pw-77bb", "hooks-5e", "path-4c2d"} {
		if strings.Contains(msg, piece) {
			t.Errorf("the error shows %s, from a ${VAR} value:\n%s", piece, msg)
		}
	}
	for _, field := range []string{"redis.url", "locking.masters[0]", "http.listen", "schedule", "timezone", "http.url",
		`job "ftp": http.url`, `job "nohost": http.url`} {
		if !strings.Contains(msg, field+": ") {
			t.Errorf("no error about %s:\n%s", field, msg)
		}
	}
}
