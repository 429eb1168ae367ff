package executor_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/executor"
)

// exServer is an http server on 127.0.0.1, closed at cleanup.
func exServer(t *testing.T, h http.HandlerFunc) *httptest.Server {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func httpJob(url string) *config.Job {
	return &config.Job{Name: "ping", HTTP: &config.HTTPSpec{Method: "GET", URL: url}}
}

func TestHTTPSuccess(t *testing.T) {
	type seen struct {
		method, body string
		header       http.Header
	}
	got := make(chan seen, 1)
	srv := exServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, string(b), r.Header.Clone()}
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, "created")
	})
	j := httpJob(srv.URL + "/hook")
	j.HTTP.Method = "POST"
	j.HTTP.Body = `{"x":1}`
	j.HTTP.Headers = map[string]string{"Content-Type": "application/json", "X-Baton-Job": "spoofed"}
	res, err := exExecutor(executor.WithHTTPClient(srv.Client())).Execute(exCtx(t), j, exRun("ping"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != http.StatusCreated || string(res.Output) != "created" {
		t.Errorf("Result %+v", res)
	}
	s := <-got
	if s.method != "POST" || s.body != `{"x":1}` || s.header.Get("Content-Type") != "application/json" {
		t.Errorf("server saw %+v", s)
	}
	for k, v := range exRun("ping").Headers() {
		if s.header.Get(k) != v {
			t.Errorf("header %s = %q, want %q", k, s.header.Get(k), v)
		}
	}
}

func TestHTTPStatus(t *testing.T) {
	srv := exServer(t, func(w http.ResponseWriter, r *http.Request) {
		code := map[string]int{"/500": 500, "/404": 404, "/200": 200}[r.URL.Path]
		w.WriteHeader(code)
		io.WriteString(w, "details")
	})
	e := exExecutor(executor.WithHTTPClient(srv.Client()))
	for _, tc := range []struct {
		path   string
		expect []int
		ok     bool
	}{
		{"/200", nil, true},
		{"/500", nil, false},
		{"/404", []int{404}, true},
		{"/200", []int{204}, false},
	} {
		j := httpJob(srv.URL + tc.path)
		j.HTTP.ExpectStatus = tc.expect
		res, err := e.Execute(exCtx(t), j, exRun("ping"), nil)
		if tc.ok != (err == nil) || (err != nil && !errors.Is(err, executor.ErrUnexpectedStatus)) {
			t.Errorf("%s expecting %v: %v", tc.path, tc.expect, err)
		}
		if res.Status == 0 || string(res.Output) != "details" {
			t.Errorf("%s: Result %+v", tc.path, res)
		}
	}
}

func TestHTTPBodyBounded(t *testing.T) {
	srv := exServer(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, strings.Repeat("a", 1<<20))
	})
	res, err := exExecutor(executor.WithHTTPClient(srv.Client()), executor.WithOutputLimit(1000)).Execute(exCtx(t), httpJob(srv.URL), exRun("ping"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Output) != 1000 {
		t.Errorf("kept %d bytes, want 1000", len(res.Output))
	}
}

func TestHTTPTimeoutAndCancel(t *testing.T) {
	arrived := make(chan struct{}, 1)
	srv := exServer(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case arrived <- struct{}{}:
		default:
		}
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	})
	e := exExecutor(executor.WithHTTPClient(srv.Client()))
	j := httpJob(srv.URL)
	j.Timeout = 100 * time.Millisecond
	begin := time.Now()
	if _, err := e.Execute(exCtx(t), j, exRun("ping"), nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("timeout: %v", err)
	}
	if took := time.Since(begin); took > 5*time.Second {
		t.Errorf("timed out after %v", took)
	}
	<-arrived

	ctx, cancel := context.WithCancel(exCtx(t))
	go func() {
		select {
		case <-arrived:
		case <-ctx.Done():
		}
		cancel()
	}()
	if _, err := e.Execute(ctx, httpJob(srv.URL), exRun("ping"), nil); !errors.Is(err, context.Canceled) {
		t.Errorf("cancel: %v", err)
	}
}

func TestHTTPRedactsURL(t *testing.T) {
	j := httpJob("http://user:secret@127.0.0.1:1/x")
	_, err := exExecutor().Execute(exCtx(t), j, exRun("ping"), nil)
	if err == nil || strings.Contains(err.Error(), "secret") {
		t.Errorf("error %v", err)
	}
}

// A runtime schedule's http request follows no redirect: its URL was
// checked against schedules.http_prefixes, the place a server redirects
// it to was not. The redirect is its response (not 2xx: a failure). A job
// of the list follows redirects as before.
func TestRuntimeScheduleHTTPRequestFollowsNoRedirect(t *testing.T) {
	hits := make(chan string, 4)
	outside := exServer(t, func(w http.ResponseWriter, r *http.Request) { hits <- r.URL.Path })
	allowed := exServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, outside.URL+"/metadata", http.StatusFound)
	})
	e := exExecutor()
	j := httpJob(allowed.URL + "/tenants/42")
	j.Name = "@report/tenant-42"
	res, err := e.Execute(exCtx(t), j, exRun(j.Name), nil)
	if !errors.Is(err, executor.ErrUnexpectedStatus) || res.Status != http.StatusFound {
		t.Errorf("runtime schedule: status %d, err %v", res.Status, err)
	}
	select {
	case p := <-hits:
		t.Fatalf("the redirect was followed to %s", p)
	default:
	}
	if _, err := e.Execute(exCtx(t), httpJob(allowed.URL+"/x"), exRun("ping"), nil); err != nil {
		t.Errorf("a job of the list: %v", err)
	}
	if p := <-hits; p != "/metadata" {
		t.Errorf("a job of the list reached %s", p)
	}
}
