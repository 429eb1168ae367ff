package executor_test

import (
	"errors"
	"net/http"
	"os/exec"
	"strings"
	"testing"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/executor"
)

// A value that came from ${VAR} is masked wherever the config or a job's
// errors are printed: argv, URLs (query included), bodies, headers,
// handler payloads, error messages of Load and of runs.
func TestSecretsFromTheEnvironmentAreMasked(t *testing.T) {
	const token = "tok-7f3a9c2e"
	const pass = "pw-51d0e8"
	t.Setenv("BATON_TEST_TOKEN", token)
	t.Setenv("BATON_TEST_PASS", pass)
	t.Setenv("BATON_TEST_HOST", "api.example.test")
	srv := exServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTeapot)
	})
	cfg, err := config.Load([]byte(`redis:
  url: redis://:${BATON_TEST_PASS}@127.0.0.1:6379/0
jobs:
  - name: push
    schedule: "@hourly"
    exec:
      command: ["/opt/${BATON_TEST_TOKEN}/push", "--token=${BATON_TEST_TOKEN}", "--mode=${BATON_TEST_MODE:-fast}"]
  - name: hook
    schedule: "@hourly"
    http:
      method: POST
      url: "` + srv.URL + `/hook?key=${BATON_TEST_TOKEN}&v=1"
      body: '{"auth":"${BATON_TEST_TOKEN}"}'
      headers: {Authorization: "Bearer ${BATON_TEST_TOKEN}"}
  - name: handle
    schedule: "@hourly"
    handler:
      name: h
      payload: {pass: "${BATON_TEST_PASS}", host: "${BATON_TEST_HOST}"}
`))
	if err != nil {
		t.Fatal(err)
	}
	printed := cfg.Redacted()
	for _, secret := range []string{token, pass, "api.example.test"} {
		if strings.Contains(printed, secret) {
			t.Errorf("Redacted shows %q:\n%s", secret, printed)
		}
	}
	for _, want := range []string{"/opt/xxxxx/push", "--token=xxxxx", "--mode=fast", "/hook?key=xxxxx&v=1", `{"auth":"xxxxx"}`, "host: xxxxx"} {
		if !strings.Contains(printed, want) {
			t.Errorf("Redacted lacks %q (the rest of a value stays readable):\n%s", want, printed)
		}
	}
	if got := cfg.MaskSecrets("calling with " + token); got != "calling with xxxxx" {
		t.Errorf("MaskSecrets = %q", got)
	}

	// a run's error: the command path, the URL's query
	_, err = exExecutor().Execute(exCtx(t), &cfg.Jobs[0], exRun("push"), nil)
	if !errors.Is(err, exec.ErrNotFound) && err == nil {
		t.Fatalf("push ran: %v", err)
	}
	if strings.Contains(err.Error(), token) || !strings.Contains(err.Error(), "/opt/xxxxx/push") {
		t.Errorf("exec error %q: want the command named, its secret masked", err)
	}
	_, err = exExecutor(executor.WithHTTPClient(srv.Client())).Execute(exCtx(t), &cfg.Jobs[1], exRun("hook"), nil)
	if !errors.Is(err, executor.ErrUnexpectedStatus) {
		t.Fatalf("hook: %v, want ErrUnexpectedStatus", err)
	}
	if strings.Contains(err.Error(), token) || strings.Contains(err.Error(), "?") || !strings.Contains(err.Error(), srv.URL+"/hook") {
		t.Errorf("http error %q: want scheme://host/path, no query", err)
	}
	srv.Close() // a transport error quotes the URL too
	_, err = exExecutor(executor.WithHTTPClient(srv.Client())).Execute(exCtx(t), &cfg.Jobs[1], exRun("hook"), nil)
	if err == nil || strings.Contains(err.Error(), token) || strings.Contains(err.Error(), "key=") {
		t.Errorf("http transport error %q: want no query", err)
	}

	// Load's own errors
	_, err = config.Load([]byte(`redis:
  url: redis://127.0.0.1:6379/0
jobs:
  - name: bad
    schedule: "@hourly"
    http: {url: "ftp://${BATON_TEST_TOKEN}.example/x"}
`))
	if err == nil || strings.Contains(err.Error(), token) {
		t.Errorf("config.Load error %q: want the secret masked", err)
	}
}

// A ${VAR} value in an http job's URL path reaches the run's error
// percent-encoded (the error names scheme://host/path); that spelling is
// masked too.
func TestSecretInAnHTTPURLPathIsMaskedEscaped(t *testing.T) {
	const secret = "hook key+7f3a9c/é"
	t.Setenv("BATON_TEST_HOOK", secret)
	srv := exServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTeapot)
	})
	cfg, err := config.Load([]byte(`redis:
  url: redis://127.0.0.1:6379/0
jobs:
  - name: hook
    schedule: "@hourly"
    http: {url: "` + srv.URL + `/hooks/${BATON_TEST_HOOK}/run"}
`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = exExecutor(executor.WithHTTPClient(srv.Client())).Execute(exCtx(t), &cfg.Jobs[0], exRun("hook"), nil)
	if !errors.Is(err, executor.ErrUnexpectedStatus) {
		t.Fatalf("hook: %v, want ErrUnexpectedStatus", err)
	}
	if msg := err.Error(); strings.Contains(msg, "7f3a9c") || !strings.Contains(msg, srv.URL+"/hooks/xxxxx/run") {
		t.Errorf("http error %q: want the path's secret masked in its escaped form", msg)
	}
}
