package baton_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
)

// hourlyJobs loads a config of hourly exec jobs in namespace ns, on the
// Redis at addr, whose worker consumes queues default and other.
func hourlyJobs(t *testing.T, addr, ns string, jobs ...string) *config.Config {
	t.Helper()
	y := fmt.Sprintf("redis: {url: \"redis://%s/0\"}\nlocking: {fresh_deployment: true}\nnamespace: %s\n"+
		"worker: {queues: {default: 1, other: 1}, poll_interval: 100ms}\njobs:\n", addr, ns)
	for _, j := range jobs {
		y += fmt.Sprintf("  - name: %s\n    schedule: \"@every 1h\"\n    exec: {command: [\"true\"]}\n", j)
	}
	cfg, err := config.Load([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// A replica that stopped claiming is retirable beside a replica of the next
// job list once its claims are over and no queue holds a task of a job
// only it runs (removed, or moved to another queue or Redis); a task of a
// job both lists run does not hold it back.
func TestRetirableAfterStopClaiming(t *testing.T) {
	srv := redistest.New(t)
	list := func(ns string, jobs ...string) *config.Config { return hourlyJobs(t, srv.Addr(), ns, jobs...) }
	cfg := list("retire", "keep", "gone")
	next := list("retire", "keep")
	r := running(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	retirable := func(next *config.Config) string {
		t.Helper()
		why, err := r.Retirable(ctx, next)
		if err != nil {
			t.Fatal(err)
		}
		return why
	}
	poll.Require(t, 10*time.Second, "the replica running", func() bool { return r.Ready(ctx) == "" })
	if why := retirable(next); why != "claims in flight" {
		t.Errorf("before StopClaiming: %q", why)
	}
	r.StopClaiming()
	var why string
	if !poll.Until(10*time.Second, func() bool { why = retirable(next); return why == "" }) {
		t.Fatalf("not retirable 10s after StopClaiming: %s", why)
	}

	// tasks that wait: one of a job both lists run, one of the removed job
	client := asynq.NewClient(asynq.RedisClientOpt{Addr: srv.Addr()})
	defer client.Close()
	queue := cfg.QueueName("default")
	for _, id := range []string{"keep@2030-01-01T00:00:00Z", "gone@2030-01-01T00:00:00Z"} {
		if _, err := client.Enqueue(asynq.NewTask("baton:tick", nil), asynq.TaskID(id), asynq.Queue(queue), asynq.ProcessIn(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	if why := retirable(next); !strings.Contains(why, "holds gone@2030-01-01T00:00:00Z, of a job only it runs") {
		t.Errorf("with a task of the removed job waiting: %q", why)
	}
	if why := retirable(cfg); why != "" {
		t.Errorf("beside a replica of the same list: %q", why)
	}
	// another namespace runs none of its tasks
	if why := retirable(list("elsewhere", "keep", "gone")); !strings.Contains(why, "of a job only it runs") {
		t.Errorf("beside a replica of another namespace: %q", why)
	}
	insp := asynq.NewInspector(asynq.RedisClientOpt{Addr: srv.Addr()})
	defer insp.Close()
	if err := insp.DeleteTask(queue, "gone@2030-01-01T00:00:00Z"); err != nil {
		t.Fatal(err)
	}
	if why := retirable(next); why != "" {
		t.Errorf("with only a task of a job both run: %q", why)
	}
}
