package baton_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/jobs"
	"github.com/batonhq/baton/scheduler"
)

// chromiumPath finds a headless-capable Chromium: $BATON_CHROMIUM, else
// Debian's chromium on PATH. make test installs it when missing (as root).
// dashNote is a pause note typed into the dashboard: markup, to be shown as text.
const dashNote = `waiting for <b>vendor</b> fix & "more"`

func chromiumPath(t *testing.T) string {
	if p := os.Getenv("BATON_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no chromium on PATH: make test installs Debian's chromium when it runs as root")
	}
	t.Skip("no chromium on PATH (install Debian's chromium, or set BATON_CHROMIUM)")
	return ""
}

// The dashboard in a real headless Chromium: with http.token set it reads
// nothing until the token is typed in; then it shows a job's successful
// run and last success, a failing job's failure streak, and pressing pause
// pauses the job: the page says so and the flag is in Redis. With BATON_SCREENSHOT=FILE it saves a
// screenshot (docs/dashboard.png is made that way).
func TestDashboardInChromium(t *testing.T) {
	browser := chromiumPath(t)
	srv := redistest.New(t)
	cfg, err := config.Load([]byte(fmt.Sprintf(`redis: {url: "redis://%s/0"}
locking: {fresh_deployment: true}
namespace: dash
worker: {shutdown_grace: 2s}
http: {token: %q}
jobs:
  - name: report
    schedule: "@every 3s"
    concurrency: allow
    exec: {command: ["true"]}
  - name: nightly-digest
    schedule: "30 2 * * *"
    timezone: Europe/Berlin
    exec: {command: ["true"]}
  - name: flaky
    schedule: "@every 2s"
    max_retry: 0
    exec: {command: ["sh", "-c", "echo connection refused by upstream; exit 1"]}
`, srv.Addr(), apiToken)))
	if err != nil {
		t.Fatal(err)
	}
	web := serving(t, running(t, cfg, baton.WithReplicaID("dash-1")))
	ctx := context.Background()
	c, err := baton.NewCluster(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	has := func(recs []jobs.RunRecord, st jobs.Status) bool {
		for _, r := range recs {
			if r.Status == st {
				return true
			}
		}
		return false
	}
	var ok, bad []jobs.RunRecord
	if !poll.Until(20*time.Second, func() bool {
		ok, _ = c.History(ctx, "report", 5)
		bad, _ = c.History(ctx, "flaky", 5)
		return has(ok, jobs.StatusOK) && has(bad, jobs.StatusFailed)
	}) {
		t.Fatalf("no successful run of report and failed one of flaky in 20s: %+v %+v", ok, bad)
	}

	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true),
		chromedp.WindowSize(1400, 900))...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	bctx, cancelTimeout := context.WithTimeout(bctx, 60*time.Second)
	defer cancelTimeout()

	steps := []struct {
		what string
		do   chromedp.Action[chromedp.Void]
	}{
		// the last cell shows the newest run, which may be running when the
		// page refreshes (every 2 or 3 s, a run on a busy host is slow):
		// the failure streak and the last success are what the history
		// holds by now
		// with http.token set, the page reads nothing until the token is typed
		{"see that reads need the token", func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
			_, err := chromedp.Poll[chromedp.Void](`document.querySelector("#error").textContent.includes("a valid token is required") && document.querySelectorAll("#jobs tbody tr").length === 0`)(ctx, t)
			return chromedp.Void{}, err
		}},
		{"enter the token", chromedp.SetValue(`#token`, apiToken)},
		{"commit the token", func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
			_, err := chromedp.Evaluate[bool](`document.querySelector("#token").dispatchEvent(new Event("change"))`)(ctx, t)
			return chromedp.Void{}, err
		}},
		{"see flaky's failure streak", chromedp.WaitVisible(`tr[data-job="flaky"] .streak`)},
		{"see report's last success", chromedp.WaitVisible(`tr[data-job="report"] .lastok`)},
		{"type a pause note", chromedp.SetValue(`#pause-note`, dashNote)},
		{"press pause on nightly-digest", chromedp.Click(`button.pause[data-job="nightly-digest"]`)},
		{"see the resume button", chromedp.WaitVisible(`tr[data-job="nightly-digest"] button.resume`)},
	}
	// the first action starts the browser and its tab under bctx: a step's
	// own timeout context must not own them
	if err := chromedp.Do(bctx, chromedp.Navigate(web.URL+"/")); err != nil {
		t.Fatalf("open the dashboard: %v", err)
	}
	for _, st := range steps {
		sctx, cancel := context.WithTimeout(bctx, 15*time.Second)
		err := chromedp.Do(sctx, st.do)
		cancel()
		if err != nil {
			html, _ := chromedp.Run(bctx, chromedp.OuterHTML("body"))
			t.Fatalf("%s: %v\npage:\n%s", st.what, err, html)
		}
	}
	pausedText, err := chromedp.Run(bctx, chromedp.Text(`tr[data-job="nightly-digest"] td.paused`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(pausedText, "yes (api:dashboard, since ") || !strings.Contains(pausedText, dashNote) {
		t.Errorf("after pause the page shows paused = %q, want who, since when and the note %q", pausedText, dashNote)
	}
	// the note is text: its markup made no element
	if n, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll('td.paused b').length`)); err != nil || n != 0 {
		t.Errorf("the note's markup became %d elements (%v)", n, err)
	}
	rdb := srv.TestClient(t)
	if rdb.Exists(ctx, scheduler.PauseKey("dash", "nightly-digest")).Val() != 1 {
		t.Error("the dashboard's pause set no flag in Redis")
	}
	// a job's history with the output tail of its failed run
	if err := chromedp.Do(bctx,
		chromedp.Click(`tr[data-job="flaky"] a`),
		chromedp.WaitVisible(`#history pre.output`),
	); err != nil {
		t.Fatalf("history view: %v", err)
	}
	output, err := chromedp.Run(bctx, chromedp.Text(`#history pre.output`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(output, "connection refused by upstream") {
		t.Errorf("history shows output %q", output)
	}
	// resume with catch-up: the flag goes, the page says what was replayed
	if err := chromedp.Do(bctx,
		chromedp.Click(`button.catchup[data-job="nightly-digest"]`),
		chromedp.WaitVisible(`button.pause[data-job="nightly-digest"]`),
	); err != nil {
		t.Fatalf("resume with catch-up: %v", err)
	}
	// (it stays: the page's refreshes every 2s write only their time)
	if notice, err := chromedp.Run(bctx, chromedp.Text(`#notice`)); err != nil || !strings.Contains(notice, "nightly-digest resumed: ") {
		t.Errorf("after resume with catch-up the page says %q (%v)", notice, err)
	}
	if rdb.Exists(ctx, scheduler.PauseKey("dash", "nightly-digest")).Val() != 0 {
		t.Error("the dashboard's resume left the pause flag in Redis")
	}
	if path := os.Getenv("BATON_SCREENSHOT"); path != "" {
		png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
