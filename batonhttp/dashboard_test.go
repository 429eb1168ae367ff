package batonhttp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/internal/replicatest"
	"github.com/batonhq/baton/internal/schedstore"
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

// dashboardPage is a dashboard open in a headless Chromium, driven step by
// step: a step that fails ends the test with the page's HTML.
type dashboardPage struct {
	t   *testing.T
	ctx context.Context
	url string
}

// openDashboard starts Chromium at 1400x900 on web's dashboard.
func openDashboard(t *testing.T, url string) *dashboardPage {
	t.Helper()
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true),
		chromedp.WindowSize(1400, 900))...)
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(cancelBrowser)
	bctx, cancelTimeout := context.WithTimeout(bctx, 2*time.Minute)
	t.Cleanup(cancelTimeout)
	p := &dashboardPage{t: t, ctx: bctx, url: url}
	// the first action starts the browser and its tab under bctx: a step's
	// own timeout context must not own them
	// a headless page has no focus of its own: emulated, focus and blur
	// events fire as in a window in front
	focused := chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, emulation.SetFocusEmulationEnabled, emulation.SetFocusEmulationEnabledParams{Enabled: true})
		return err
	})
	if err := chromedp.Do(bctx, focused, chromedp.Navigate(url+"/")); err != nil {
		t.Fatalf("open the dashboard: %v", err)
	}
	return p
}

// step runs actions within 15s or fails the test, naming what.
func (p *dashboardPage) step(what string, actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	sctx, cancel := context.WithTimeout(p.ctx, 15*time.Second)
	defer cancel()
	if err := chromedp.Do(sctx, actions...); err != nil {
		html, _ := chromedp.Run(p.ctx, chromedp.OuterHTML("body"))
		p.t.Fatalf("%s: %v\npage:\n%s", what, err, html)
	}
}

// until waits for the JavaScript condition cond.
func (p *dashboardPage) until(what, cond string) {
	p.t.Helper()
	p.step(what, pollJS(cond))
}

// text is the text of the first element sel matches, once there is one,
// read in one evaluation: the page renders its view again every few
// seconds, and a node looked up first and read after (chromedp.Text)
// may have been replaced between the two and read as "".
func (p *dashboardPage) text(sel string) string {
	p.t.Helper()
	q, err := json.Marshal(sel)
	if err != nil {
		p.t.Fatal(err)
	}
	p.until("find "+sel, fmt.Sprintf(`document.querySelector(%s) !== null`, q))
	return evalJS[string](p, fmt.Sprintf(`(document.querySelector(%[1]s) || {innerText: ""}).innerText`, q))
}

// clickNow clicks the first element sel matches, once there is one, in
// one evaluation: the page renders its view again every few seconds, and
// a node looked up first and clicked after (chromedp.Click) may have been
// replaced between the two ("Could not find node with given id").
func clickNow(sel string) chromedp.Action[chromedp.Void] {
	q, err := json.Marshal(sel)
	if err != nil {
		panic(err) // unreachable: a string
	}
	return pollJS(fmt.Sprintf(`(() => { const e = document.querySelector(%s); if (!e) return false; e.click(); return true; })()`, q))
}

// pollJS evaluates expr until it is true. An evaluation in a page that a
// navigation has just replaced fails with "Cannot find context with
// specified id" (the old page's JavaScript context is gone, the new one
// not yet known): it is evaluated again in the new one.
func pollJS(expr string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		for {
			_, err := chromedp.Poll[chromedp.Void](expr)(ctx, t)
			if err == nil || ctx.Err() != nil || !strings.Contains(err.Error(), "Cannot find context with specified id") {
				return chromedp.Void{}, err
			}
			select {
			case <-ctx.Done():
				return chromedp.Void{}, ctx.Err()
			case <-time.After(20 * time.Millisecond): // the browser's new page, not a clock of ours
			}
		}
	}
}

// shownNow waits until the first element sel matches is shown (laid out:
// it has a box), looked up and measured in one evaluation each time: the
// page renders its view again every few seconds, and a wait that holds a
// node found first (chromedp.WaitVisible) waits on a node the render
// replaced, for ever, when the page is slow enough to render between.
func shownNow(sel string) chromedp.Action[chromedp.Void] {
	q, err := json.Marshal(sel)
	if err != nil {
		panic(err) // unreachable: a string
	}
	return pollJS(fmt.Sprintf(`(() => { const e = document.querySelector(%s); return !!e && e.getClientRects().length > 0; })()`, q))
}

// evalJS evaluates a JavaScript expression on p.
func evalJS[T any](p *dashboardPage, expr string) T {
	p.t.Helper()
	var v T
	p.step("evaluate "+expr, func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		var err error
		v, err = chromedp.Evaluate[T](expr)(ctx, t)
		return chromedp.Void{}, err
	})
	return v
}

// screenshot saves the page to docs/NAME when BATON_SCREENSHOTS is set
// (the images in docs/ are made that way).
func (p *dashboardPage) screenshot(name string) {
	p.t.Helper()
	if os.Getenv("BATON_SCREENSHOTS") == "" {
		return
	}
	var png []byte
	p.step("screenshot "+name, func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		var err error
		png, err = chromedp.FullScreenshot(100)(ctx, t)
		return chromedp.Void{}, err
	})
	if err := os.WriteFile("../docs/"+name, png, 0o644); err != nil {
		p.t.Fatal(err)
	}
}

// dashboardDeployment runs one replica with four jobs (report succeeds
// every 3s, nightly-digest runs at 02:30 Berlin time, flaky fails every
// 2s with an output, quiet is paused by the config) behind http.token, until report succeeded and flaky
// failed; it returns the replica's web server, a Cluster on it and its
// Redis.
func dashboardDeployment(t *testing.T) (*httptest.Server, *baton.Cluster, *redistest.Server) {
	t.Helper()
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
    exec: {command: ["sh", "-c", "echo 'connection refused by upstream <img src=x onerror=alert(1)>'; exit 1"]}
  - name: quiet
    schedule: "@every 2s"
    paused: true
    exec: {command: ["true"]}
`, srv.Addr(), apiToken)))
	if err != nil {
		t.Fatal(err)
	}
	web := replicatest.Serving(t, replicatest.Running(t, cfg, baton.WithReplicaID("dash-1")))
	c, err := baton.NewCluster(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	var ok, bad []jobs.RunRecord
	if !poll.Until(20*time.Second, func() bool {
		ok, _ = c.History(context.Background(), "report", 5)
		bad, _ = c.History(context.Background(), "flaky", 5)
		return hasStatus(ok, jobs.StatusOK) && hasStatus(bad, jobs.StatusFailed)
	}) {
		t.Fatalf("no successful run of report and failed one of flaky in 20s: %+v %+v", ok, bad)
	}
	return web, c, srv
}

func hasStatus(recs []jobs.RunRecord, st jobs.Status) bool {
	for _, r := range recs {
		if r.Status == st {
			return true
		}
	}
	return false
}

// The dashboard in a real headless Chromium, as an operator uses it: with
// http.token set it reads nothing until the token is typed in; then the
// grid shows each job's ticks, a failed tick of flaky among them, whose
// tick, outcome and reason show on focus, and a click on it opens its
// run's page with the output; a paused job's ticks, which never ran, are
// cells too, and one opens its tick's page; the banner names the failing job and the
// unsigned tasks. With BATON_SCREENSHOTS=1 it saves docs/dashboard.png and
// docs/dashboard-phone.png (a phone's width).
func TestDashboardGridOpensAFailedRun(t *testing.T) {
	t.Parallel() // its own Redis, replicas and browser
	web, _, _ := dashboardDeployment(t)
	p := openDashboard(t, web.URL)
	p.until("see that reads need the token", `document.querySelector("#error").textContent.includes("a valid token is required") && document.querySelectorAll("#grid .row").length === 0`)
	p.step("enter the token", chromedp.SetValue(`#token`, apiToken))
	p.until("commit the token", `document.querySelector("#token").dispatchEvent(new Event("change"))`)
	p.step("see flaky's failed tick in the grid", shownNow(`#grid .row[data-job="flaky"] a.cell.o-failed`))
	p.step("see report's successful tick", shownNow(`#grid .row[data-job="report"] a.cell.o-ok`))
	p.step("see flaky's failure streak", shownNow(`#grid .row[data-job="flaky"] .streak`))
	p.step("see nightly-digest's next tick, not yet due", shownNow(`#grid .row[data-job="nightly-digest"] .cell.o-not-due`))
	p.step("see quiet's paused ticks, which never ran", shownNow(`#grid .row[data-job="quiet"] a.cell.o-paused`))
	p.step("see the banner name flaky", shownNow(`#attention li.failing a`))
	if s := p.text(`#attention li.unsigned`); !strings.Contains(s, "not signed") {
		t.Errorf("the banner says of unsigned tasks %q", s)
	}
	p.until("focus flaky's newest failed tick", `(() => { const c = [...document.querySelectorAll('#grid .row[data-job="flaky"] a.cell.o-failed')].pop(); c.focus(); return document.activeElement === c; })()`)
	// (a tooltip takes no pointer events: WaitVisible's hit test misses it)
	p.until("see its tooltip", `!document.querySelector("#tip").hidden && document.querySelector("#tip").textContent.includes("flaky")`)
	if tipText := p.text(`#tip`); !strings.Contains(tipText, "flaky") || !strings.Contains(tipText, "failed") || !strings.Contains(tipText, "exit 1") || !strings.Contains(tipText, "UTC") && !strings.Contains(tipText, "Z)") {
		t.Errorf("the focused cell's tooltip says %q, want the job, the tick, failed and exit 1", tipText)
	}
	p.step("press Enter on it", chromedp.SendKeys(`#grid .row[data-job="flaky"] a.cell.o-failed:focus`, kb.Enter))
	p.step("see the run's page", shownNow(`#run[data-outcome="failed"] pre.output`))
	if loc := evalJS[string](p, `location.hash`); !strings.HasPrefix(loc, "#/jobs/flaky/runs/") {
		t.Errorf("the run's page is at %q, want #/jobs/flaky/runs/RUN", loc)
	}
	if out := p.text(`#run pre.output`); !strings.Contains(out, "connection refused by upstream <img src=x onerror=alert(1)>") {
		t.Errorf("the run's page shows output %q, want its markup as text", out)
	}
	// the output is text: its markup made no element
	if n := evalJS[int](p, `document.querySelectorAll("#view img").length`); n != 0 {
		t.Errorf("the output's markup became %d elements", n)
	}
	p.step("go back to the grid", chromedp.Navigate(web.URL+"/#/"), shownNow(`#grid .row[data-job="quiet"] a.cell.o-paused`))
	p.screenshot("dashboard.png")
	p.step("open a tick that never ran", clickNow(`#grid .row[data-job="quiet"] a.cell.o-paused`), shownNow(`#run[data-outcome="paused"]`))
	if loc := evalJS[string](p, `location.hash`); !strings.HasPrefix(loc, "#/jobs/quiet/ticks/") {
		t.Errorf("the page of a tick that never ran is at %q, want #/jobs/quiet/ticks/TICK", loc)
	}
	p.step("go back to the grid", chromedp.Navigate(web.URL+"/#/"), shownNow(`#grid .row[data-job="flaky"] a.cell.o-failed`))
	p.step("narrow the window to a phone's", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2)))
	p.step("see the grid", shownNow(`#grid .row[data-job="flaky"] a.cell`))
	if w := evalJS[int](p, `document.documentElement.scrollWidth`); w > 390 {
		t.Errorf("at a phone's width (390px) the page is %dpx wide", w)
	}
	p.screenshot("dashboard-phone.png")
}

// A failed run's page opened by its URL (a link in a chat): the page reads
// the run with the token the tab holds and shows its outcome, exit code and
// output, and links to its job.
func TestDashboardRunPageByURL(t *testing.T) {
	t.Parallel() // its own Redis, replicas and browser
	web, c, _ := dashboardDeployment(t)
	recs, err := c.History(context.Background(), "flaky", 20)
	if err != nil {
		t.Fatal(err)
	}
	var run jobs.RunRecord
	for _, r := range recs {
		if r.Status == jobs.StatusFailed && r.RunID != "" {
			run = r
			break
		}
	}
	if run.RunID == "" {
		t.Fatalf("no failed run of flaky with a run id: %+v", recs)
	}
	p := openDashboard(t, web.URL)
	// the token is kept for the tab: typed once, then the link is opened
	p.until("keep the token for the tab", fmt.Sprintf(`(sessionStorage.setItem("baton-token", %q), true)`, apiToken))
	p.step("open the run's URL", chromedp.Navigate("about:blank"), chromedp.Navigate(web.URL+"/#/jobs/flaky/runs/"+run.RunID))
	p.step("see the run's page", shownNow(`#run[data-outcome="failed"]`))
	facts := p.text(`#run dl`)
	for _, want := range []string{run.RunID, "exit 1", "failed"} {
		if !strings.Contains(facts, want) {
			t.Errorf("the run's page says %q, want %q in it", facts, want)
		}
	}
	if out := p.text(`#run pre.output`); !strings.Contains(out, "connection refused by upstream") {
		t.Errorf("the run's page shows output %q", out)
	}
	p.screenshot("dashboard-run.png")
	p.step("follow the link to its job", clickNow(`#view h2 a`), shownNow(`#history tr[data-outcome="failed"] pre.output`))
	if loc := evalJS[string](p, `location.hash`); loc != "#/jobs/flaky" {
		t.Errorf("the job's link leads to %q", loc)
	}
}

// A job's page: pause with a note (markup in it shown as text, the flag in
// Redis), resume with catch-up, and trigger a run and see it in the
// history and on its own page.
func TestDashboardJobPagePausesAndTriggers(t *testing.T) {
	t.Parallel() // its own Redis, replicas and browser
	web, _, srv := dashboardDeployment(t)
	p := openDashboard(t, web.URL)
	p.until("keep the token for the tab", fmt.Sprintf(`(sessionStorage.setItem("baton-token", %q), true)`, apiToken))
	p.step("open nightly-digest's page", chromedp.Navigate("about:blank"), chromedp.Navigate(web.URL+"/#/jobs/nightly-digest"), shownNow(`button.pause[data-job="nightly-digest"]`))
	if facts := p.text(`#view dl`); !strings.Contains(facts, "30 2 * * * (Europe/Berlin)") || !strings.Contains(facts, "next tick") {
		t.Errorf("the job's page says %q, want its schedule and next tick", facts)
	}
	if n := evalJS[int](p, `document.querySelectorAll("#next-ticks li").length`); n != 10 {
		t.Errorf("the job's page lists %d next ticks, want 10", n)
	}
	p.step("type a pause note", chromedp.SetValue(`#pause-note`, dashNote))
	p.step("press pause", clickNow(`button.pause[data-job="nightly-digest"]`))
	p.step("see the resume button", shownNow(`button.resume[data-job="nightly-digest"]`))
	pausedText := p.text(`dd.paused`)
	if !strings.Contains(pausedText, "by api:dashboard since ") || !strings.Contains(pausedText, dashNote) {
		t.Errorf("after pause the page shows paused = %q, want who, since when and the note %q", pausedText, dashNote)
	}
	// the note is text: its markup made no element
	if n := evalJS[int](p, `document.querySelectorAll('dd.paused b').length`); n != 0 {
		t.Errorf("the note's markup became %d elements", n)
	}
	ctx := context.Background()
	rdb := srv.TestClient(t)
	if rdb.Exists(ctx, scheduler.PauseKey("dash", "nightly-digest")).Val() != 1 {
		t.Error("the dashboard's pause set no flag in Redis")
	}
	p.step("resume with catch-up", clickNow(`button.catchup[data-job="nightly-digest"]`), shownNow(`button.pause[data-job="nightly-digest"]`))
	if notice := p.text(`#notice`); !strings.Contains(notice, "nightly-digest resumed: ") {
		t.Errorf("after resume with catch-up the page says %q", notice)
	}
	if rdb.Exists(ctx, scheduler.PauseKey("dash", "nightly-digest")).Val() != 0 {
		t.Error("the dashboard's resume left the pause flag in Redis")
	}
	p.step("press trigger", clickNow(`button.trigger[data-job="nightly-digest"]`), shownNow(`#notice a`))
	runID := evalJS[string](p, `decodeURIComponent(document.querySelector("#notice a").hash.split("/").pop())`)
	if runID == "" {
		t.Fatal("the trigger's notice names no run")
	}
	p.step("see the run succeed in the history", shownNow(fmt.Sprintf(`#history tr[data-run=%q][data-outcome="ok"]`, runID)))
	p.step("see its duration in the chart", shownNow(`svg.chart rect`))
	p.screenshot("dashboard-job.png")
	p.step("open the run from the notice", clickNow(`#notice a`), shownNow(`#run[data-outcome="ok"]`))
	if facts := p.text(`#run dl`); !strings.Contains(facts, runID) || !strings.Contains(facts, "manual") {
		t.Errorf("the triggered run's page says %q, want its id %s and manual", facts, runID)
	}
	// at a phone's width the job's page fits: wide tables scroll in their box
	p.step("open flaky's page at a phone's width", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2)),
		chromedp.Navigate(web.URL+"/#/jobs/flaky"), shownNow(`#history pre.output`))
	if w := evalJS[int](p, `document.documentElement.scrollWidth`); w > 390 {
		t.Errorf("at a phone's width (390px) the job's page is %dpx wide", w)
	}
}

// The banner on a brand-new Redis that no baton init marked: its lock
// master waits out its restart quarantine, and the banner says so, until
// when (relative, UTC on hover) and why, and that the replica holds its
// ticks back meanwhile; a second replica runs another job list, and the
// banner names the job they differ on; tasks are unsigned.
func TestDashboardBannerShowsMasterInQuarantine(t *testing.T) {
	t.Parallel() // its own Redis, replicas and browser
	srv, cfg := replicatest.BeatOnBrandNewRedis(t, "fresh", "@every 1s")
	web := replicatest.Serving(t, replicatest.Running(t, cfg, baton.WithReplicaID("fresh-1")))
	other, err := config.Load(fmt.Appendf(nil, `redis: {url: "redis://%s/0"}
namespace: fresh
jobs:
  - name: beat
    schedule: "@every 1s"
    exec: {command: ["true"]}
  - name: newcomer
    schedule: "@hourly"
    exec: {command: ["true"]}
`, srv.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	replicatest.Running(t, other, baton.WithReplicaID("fresh-2"))
	p := openDashboard(t, web.URL)
	p.step("see the master in the banner", shownNow(`#attention li.master time`))
	line := p.text(`#attention li.master`)
	if !strings.Contains(line, "lock master 0") || !strings.Contains(line, "restart quarantine") || !strings.Contains(line, "which ends in ") ||
		!strings.Contains(line, "baton init") {
		t.Errorf("the banner says %q, want master 0 in its restart quarantine, until when and how baton init skips it", line)
	}
	if title := evalJS[string](p, `document.querySelector("#attention li.master time").title`); !strings.Contains(title, "Z ·") {
		t.Errorf("the quarantine's end has the title %q, want its UTC time", title)
	}
	p.step("see the ticks held back meanwhile", shownNow(`#attention li.held`))
	if s := p.text(`#attention li.held`); !strings.Contains(s, "replica fresh-1 holds ") {
		t.Errorf("the banner says of held ticks %q", s)
	}
	p.step("see the job lists differ", shownNow(`#attention li.lists`))
	if s := p.text(`#attention li.lists`); !strings.Contains(s, "different job lists") || !strings.Contains(s, "newcomer") {
		t.Errorf("the banner says of the job lists %q, want the job they differ on", s)
	}
	if s := p.text(`#attention li.unsigned`); !strings.Contains(s, "not signed") {
		t.Errorf("the banner says of unsigned tasks %q", s)
	}
}

// The runtime schedules' page lists them a page at a time, in id order,
// with a prefix filter; a row opens the schedule's job page ("@" + id,
// escaped whole in the URL), whose pause reaches Redis through the jobs'
// routes; a schedule the replicas refuse is in the banner, one no live
// replica can run is shown waiting. The runtime calendars are listed below
// with their days.
func TestDashboardSchedulesPageListsAndOpensASchedule(t *testing.T) {
	t.Parallel() // its own Redis, replicas and browser
	web, c, srv := dashboardDeployment(t)
	ctx := context.Background()
	put := func(id string) {
		t.Helper()
		// no replica of the deployment registers "report": put ahead of a
		// deploy, each is shown waiting
		if _, err := c.PutSchedule(ctx, id, baton.ScheduleSpec{Schedule: "0 9 * * *", Timezone: "Europe/Berlin", Handler: "report"}, baton.AheadOfDeploy()); err != nil {
			t.Fatal(err)
		}
	}
	put("other/x")
	if _, err := c.PutCalendar(ctx, "holidays-de", baton.CalendarSpec{Dates: []string{"2026-12-25"}, Ranges: []string{"2026-12-31..2027-01-01"}, Weekdays: []string{"sun"}}); err != nil {
		t.Fatal(err)
	}
	for i := range 51 {
		put(fmt.Sprintf("tenant/%02d", i))
	}
	// stored by a writer without the config's checks: the replica refuses it
	if _, err := schedstore.New(srv.TestClient(t), "dash", nil, 1).Put(ctx, "tenant/zz", json.RawMessage(`{"schedule":"not cron","handler":{"name":"report"}}`), schedstore.Any); err != nil {
		t.Fatal(err)
	}
	p := openDashboard(t, web.URL)
	// no token yet: the page says what it needs instead of "loading…"
	p.until("the page to say it needs the token", `document.querySelector("#updated").textContent === "needs the token" && document.querySelector("#view").textContent.includes("behind http.token")`)
	p.until("keep the token for the tab", fmt.Sprintf(`(sessionStorage.setItem("baton-token", %q), true)`, apiToken))
	p.step("open the schedules' page", chromedp.Navigate("about:blank"), chromedp.Navigate(web.URL+"/#/schedules"), shownNow(`#schedules tr[data-id="other/x"]`))
	if n := evalJS[int](p, `document.querySelectorAll("#schedules tr[data-id]").length`); n != 50 {
		t.Errorf("the first page lists %d schedules, want 50", n)
	}
	if heads := evalJS[string](p, `[...document.querySelectorAll("#schedules th")].map((h) => h.textContent).join(",")`); heads != "id,schedule,next tick,last,recent,paused,updated" ||
		evalJS[int](p, `document.querySelectorAll("#sched-sort option").length`) != 2 {
		t.Errorf("the schedules table's columns %q, or no sort choice", heads)
	}
	if cal := p.text(`#calendars tr[data-name="holidays-de"]`); !strings.Contains(cal, "2026-12-25, 2026-12-31..2027-01-01, every sun") {
		t.Errorf("the runtime calendar's row says %q, want its days", cal)
	}
	p.until("the banner names the refused schedule", `[...document.querySelectorAll("#attention li.refused a")].some((a) => a.textContent === "tenant/zz")`)
	p.step("next page", clickNow(`#sched-next`), shownNow(`#schedules tr[data-id="tenant/50"]`))
	if ids := evalJS[[]string](p, `[...document.querySelectorAll("#schedules tr[data-id]")].map((r) => r.dataset.id)`); strings.Join(ids, " ") != "tenant/49 tenant/50 tenant/zz" {
		t.Errorf("the second page lists %v, want tenant/49, tenant/50 and tenant/zz", ids)
	}
	if refused := p.text(`#schedules tr[data-id="tenant/zz"]`); !strings.Contains(refused, "refused") {
		t.Errorf("the refused schedule's row says %q", refused)
	}
	if waiting := p.text(`#schedules tr[data-id="tenant/50"]`); !strings.Contains(waiting, `waiting: no live replica registers Go handler "report"`) {
		t.Errorf("the row of a schedule no replica can run says %q, want it waiting", waiting)
	}
	p.step("filter by a prefix", chromedp.SendKeys(`#sched-prefix`, "tenant/4"+kb.Enter), shownNow(`#schedules tr[data-id="tenant/42"]`))
	if n := evalJS[int](p, `document.querySelectorAll("#schedules tr[data-id]").length`); n != 10 {
		t.Errorf("prefix tenant/4 lists %d schedules, want 10", n)
	}
	p.step("open tenant/42", clickNow(`#schedules tr[data-id="tenant/42"] a`), shownNow(`button.pause[data-job="@tenant/42"]`))
	if hash := evalJS[string](p, `location.hash`); hash != "#/jobs/%40tenant%2F42" {
		t.Errorf("the schedule's page is at %q", hash)
	}
	if facts := p.text(`#view dl`); !strings.Contains(facts, "0 9 * * * (Europe/Berlin)") || !strings.Contains(facts, "next tick") {
		t.Errorf("the schedule's page says %q, want its schedule and next tick", facts)
	}
	p.step("pause it", chromedp.SetValue(`#pause-note`, "tenant moves"), clickNow(`button.pause[data-job="@tenant/42"]`),
		shownNow(`button.resume[data-job="@tenant/42"]`))
	rdb := srv.TestClient(t)
	if rdb.Exists(ctx, scheduler.PauseKey("dash", "@tenant/42")).Val() != 1 {
		t.Error("the dashboard's pause of a runtime schedule set no flag in Redis")
	}
	p.step("resume it", clickNow(`button.resume[data-job="@tenant/42"]`), shownNow(`button.pause[data-job="@tenant/42"]`))
	if rdb.Exists(ctx, scheduler.PauseKey("dash", "@tenant/42")).Val() != 0 {
		t.Error("the dashboard's resume of a runtime schedule left the pause flag in Redis")
	}
	// the grid shows them beside the job list, a page at a time
	p.step("open the grid", chromedp.Navigate(web.URL+"/#/"), shownNow(`#grid-schedules .row`))
	if n := evalJS[int](p, `document.querySelectorAll("#grid-schedules .row").length`); n != 20 || evalJS[int](p, `document.querySelectorAll("#grid-sched-next").length`) != 1 {
		t.Errorf("the grid shows %d runtime schedules (want a page of 20) or no next page", n)
	}
	p.step("filter the grid's schedules", chromedp.SendKeys(`#grid-sched-prefix`, "other/"+kb.Enter))
	p.until("the grid to show other/x alone", `document.querySelectorAll("#grid-schedules .row").length === 1 && !!document.querySelector('#grid-schedules .row[data-job="@other/x"]')`)
}

// The dashboard lists the limits shared by jobs: a limit of one slot held
// by a long run shows "1 of 1", the jobs naming it, and the holding run,
// linked to its job.
func TestDashboardShowsWhoHoldsALimitsSlots(t *testing.T) {
	t.Parallel() // its own Redis, replica and browser
	srv := redistest.New(t)
	cfg, err := config.Load(fmt.Appendf(nil, `redis: {url: "redis://%s/0"}
locking: {fresh_deployment: true}
namespace: lim
worker: {shutdown_grace: 1s}
limits: {warehouse: 1}
jobs:
  - name: hold
    schedule: "@every 1s"
    limit: warehouse
    exec: {command: ["sleep", "60"]}
  - name: wait
    schedule: "@hourly"
    limit: warehouse
    exec: {command: ["true"]}
`, srv.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	web := replicatest.Serving(t, replicatest.Running(t, cfg, baton.WithReplicaID("lim-1")))
	p := openDashboard(t, web.URL)
	p.until("see hold's run in the limit's slot", `(document.querySelector("#limits tbody tr") || {textContent: ""}).textContent.includes("slot 0: hold@")`)
	row := p.text(`#limits tbody tr`)
	for _, want := range []string{"warehouse", "1 of 1", "hold, wait", "slot 0: hold@", " on lim-1 since "} {
		if !strings.Contains(row, want) {
			t.Errorf("the limits' row says %q, want %q in it", row, want)
		}
	}
}
