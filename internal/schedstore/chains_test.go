package schedstore

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
)

// hours are the hours of job j's next n ticks after from.
func hours(j *config.Job, from time.Time, n int) string {
	var out []string
	for t := j.Sched.Next(from); len(out) < n && !t.IsZero(); t = j.Sched.Next(t) {
		out = append(out, t.Format("15:04"))
	}
	return strings.Join(out, " ")
}

// A runtime schedule run after another ticks at its parent's ticks as they
// are now: a change of the parent's schedule reaches the child and its
// own child, a delete of the parent refuses them (naming it), and the
// parent put again brings them back. Children are read before their
// parents (ids in that order), and the copy knows who runs after whom.
func TestScheduleRunsAfterItsParentAsItChanges(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	cfg := testConfig(t, "timezone: UTC\n")
	writer := New(rdb, cfg.Namespace, nil, 1)
	put(t, writer, "z-extract", `{schedule: "0 2 * * *", handler: {name: h}}`)
	put(t, writer, "b-load", `{after: ["@z-extract"], handler: {name: h}}`)
	put(t, writer, "a-report", `{after: ["@b-load"], handler: {name: h}}`)
	_, f, a := following(t, rdb, cfg)
	for _, n := range []string{"@b-load", "@a-report"} {
		if j := a.job(n); j == nil || hours(j, dec23, 2) != "02:00 02:00" {
			t.Fatalf("after sync, %s: %v (refused %v)", n, j, f.Refused())
		}
	}
	if ch := f.ScheduleChildren("@z-extract"); len(ch) != 1 || ch[0].Name != "@b-load" {
		t.Fatalf("children %v", ch)
	}
	if ch := cfg.WithSource(f).Children("@b-load"); len(ch) != 1 || ch[0].Name != "@a-report" {
		t.Fatalf("Config.Children %v", ch)
	}
	put(t, writer, "z-extract", `{schedule: "30 3 * * *", handler: {name: h}}`)
	poll.Require(t, 5*time.Second, "the parent's change applied to its child and grandchild", func() bool {
		c, g := a.job("@b-load"), a.job("@a-report")
		return c != nil && g != nil && hours(c, dec23, 1) == "03:30" && hours(g, dec23, 1) == "03:30"
	})
	if _, err := writer.Delete(context.Background(), "z-extract"); err != nil {
		t.Fatal(err)
	}
	poll.Require(t, 5*time.Second, "the children refused without their parent", func() bool { return !a.has("@b-load") && !a.has("@a-report") })
	if r := f.Refused(); len(r) != 2 || !strings.Contains(r[1].Err.Error(), `no job "@z-extract"`) {
		t.Fatalf("refused %v", r)
	}
	put(t, writer, "z-extract", `{schedule: "0 4 * * *", handler: {name: h}}`)
	poll.Require(t, 5*time.Second, "the children back with their parent", func() bool {
		c, g := a.job("@b-load"), a.job("@a-report")
		return c != nil && g != nil && hours(c, dec23, 1) == "04:00" && hours(g, dec23, 1) == "04:00"
	})
	if len(f.Refused()) != 0 {
		t.Fatalf("refused %v", f.Refused())
	}
}

// A schedule run after a job of the list ticks at its ticks; a worker's
// lookup of a chained schedule its copy does not hold (WithFetch) reads
// its parents from Redis too.
func TestScheduleRunsAfterAJobOfTheList(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	cfg := testConfig(t, "timezone: UTC\njobs: [{name: extract, schedule: \"15 1 * * *\", handler: {name: h}}]\n")
	writer := New(rdb, cfg.Namespace, nil, 1)
	put(t, writer, "p", `{schedule: "0 5 * * *", handler: {name: h}}`)
	put(t, writer, "c", `{after: [extract, "@p"], handler: {name: h}}`)
	f := NewFollower(Of(rdb, cfg), cfg, nil, WithFetch())
	j, ok := f.ScheduleJob("@c")
	if !ok || hours(j, dec23, 2) != "01:15 05:00" {
		t.Fatalf("fetched %v %v", j, ok)
	}
	// a cycle put behind the checks' back is refused, not followed for ever
	put(t, writer, "p", `{after: ["@c"], handler: {name: h}}`)
	if _, ok := f.ScheduleJob("@c"); ok {
		t.Fatal("a schedule in a cycle was decoded")
	}
}

// A schedule read outside the copy (WithFetch: a Cluster's put check, a
// worker's task of a schedule its copy lacks) finds every ancestor, also
// one that two of its ancestors run after (a diamond is no cycle).
func TestScheduleJobFetchedFindsAnAncestorSharedByTwoParents(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	cfg := testConfig(t, "timezone: UTC\n")
	writer := New(rdb, cfg.Namespace, nil, 1)
	put(t, writer, "root", `{schedule: "0 2 * * *", handler: {name: h}}`)
	put(t, writer, "left", `{after: ["@root"], handler: {name: h}}`)
	put(t, writer, "right", `{after: ["@root"], handler: {name: h}}`)
	put(t, writer, "join", `{after: ["@left", "@right"], handler: {name: h}}`)
	put(t, writer, "report", `{after: ["@join"], handler: {name: h}}`)
	put(t, writer, "summary", `{after: ["@root", "@left"], handler: {name: h}}`)
	f := NewFollower(Of(rdb, cfg), cfg, nil, WithFetch())
	if j, ok := f.ScheduleJob("@summary"); !ok || hours(j, dec23, 1) != "02:00" {
		t.Fatalf("@summary, after @root and @left (itself after @root), fetched: %v %v", j, ok)
	}
	if j, ok := f.ScheduleJob("@join"); !ok || hours(j, dec23, 1) != "02:00" {
		t.Fatalf("@join fetched: %v %v", j, ok)
	}
	if j, ok := f.ScheduleJob("@report"); !ok || hours(j, dec23, 1) != "02:00" {
		t.Fatalf("@report, after @join whose two parents run after @root, fetched: %v %v", j, ok)
	}
}
