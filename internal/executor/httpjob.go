package executor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/redact"
	"github.com/batonhq/baton/jobs"
)

// runHTTP sends the job's request and checks the response status.
func (e *Executor) runHTTP(ctx context.Context, job *config.Job, run jobs.Run) (jobs.Result, error) {
	spec := job.HTTP
	method := spec.Method
	if method == "" {
		method = http.MethodGet
	}
	target := redact.Endpoint(spec.URL) // no password or query (tokens) in errors
	var body io.Reader = http.NoBody
	if spec.Body != "" {
		body = strings.NewReader(spec.Body)
	}
	var res jobs.Result
	req, err := http.NewRequestWithContext(ctx, method, spec.URL, body)
	if err != nil {
		return res, fmt.Errorf("executor: job %q: http %s %s: %w", job.Name, method, target, err)
	}
	for k, v := range spec.Headers {
		if http.CanonicalHeaderKey(k) == "Host" {
			req.Host = v // Go sends req.Host, not a Host header
			continue
		}
		req.Header.Set(k, v)
	}
	for k, v := range run.Headers() {
		req.Header.Set(k, v)
	}
	client := e.client
	if config.IsScheduleJob(job.Name) {
		client = e.runtimeClient // no redirect out of the allowed prefixes
	}
	resp, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // it quotes the whole URL, query included
		}
		return res, fmt.Errorf("executor: job %q: http %s %s: %w", job.Name, method, target, err)
	}
	defer resp.Body.Close()
	res.Status = resp.StatusCode
	b, err := io.ReadAll(io.LimitReader(resp.Body, int64(e.outputLimit)))
	if len(b) > 0 {
		res.Output = b
	}
	if !statusOK(resp.StatusCode, spec.ExpectStatus) {
		want := "2xx"
		if len(spec.ExpectStatus) > 0 {
			want = fmt.Sprint(spec.ExpectStatus)
		}
		return res, fmt.Errorf("%w: job %q: http %s %s: status %d, want %s", ErrUnexpectedStatus, job.Name, method, target, resp.StatusCode, want)
	}
	if err != nil {
		return res, fmt.Errorf("executor: job %q: http %s %s: reading the response: %w", job.Name, method, target, err)
	}
	return res, nil
}

// statusOK reports whether code is one of expect, or a 2xx if expect is
// empty.
func statusOK(code int, expect []int) bool {
	if len(expect) == 0 {
		return code >= 200 && code <= 299
	}
	return slices.Contains(expect, code)
}
