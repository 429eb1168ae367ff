package baton_test

import (
	"context"
	"log"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/batonhttp"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/jobs"
)

// A service that runs baton inside itself, with its own Go handler. Every
// replica of the service runs this; each tick of "report" runs once across
// them. The config names the handler:
//
//	jobs:
//	  - name: report
//	    schedule: "0 * * * *"
//	    handler: {name: report, payload: {format: pdf}}
func ExampleNew() {
	baton.MaybeRunSupervisor() // first thing in main, if the config has exec jobs

	cfg, err := config.LoadFile("baton.yaml")
	if err != nil {
		log.Fatal(err)
	}
	reg := jobs.NewRegistry()
	err = reg.HandleFunc("report", func(ctx context.Context, run jobs.Run) error {
		slog.Info("building the report", "tick", run.Tick, "fence", run.Fence)
		return nil // an error is retried per the job's max_retry
	})
	if err != nil {
		log.Fatal(err)
	}
	// go-redis's own lines (a pool that cannot dial) through the same logger:
	// go-redis keeps one logger per process, so the program sets it
	redis.SetLogger(baton.RedisLogger(slog.Default()))
	r, err := baton.New(cfg, baton.WithHandlers(reg), baton.WithLogger(slog.Default()))
	if err != nil {
		log.Fatal(err)
	}
	h := batonhttp.NewHandler(r) // /healthz, /readyz, /metrics
	defer h.Close()
	go func() { _ = http.ListenAndServe("127.0.0.1:8080", h) }()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := r.Run(ctx); err != nil { // until SIGTERM, then a graceful shutdown
		log.Fatal(err)
	}
}
