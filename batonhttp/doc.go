// Package batonhttp serves baton's replicas over HTTP: the probes
// (/healthz, /readyz), Prometheus metrics (/metrics), the JSON API under
// /api/ and the dashboard (/), for the replicas of one process. It is the
// one package of baton that imports net/http and Prometheus: a program
// that embeds baton without serving it links neither.
//
//	r, err := baton.New(cfg, baton.WithHandlers(reg))
//	...
//	h := batonhttp.NewHandler(r)
//	defer h.Close()
//	go func() { _ = http.ListenAndServe("127.0.0.1:8080", h) }()
//
// A Handler is built once over its replicas (handler.go): it opens a
// baton.Cluster on their config, which the API reads and steers, checks
// the replicas' readiness every ReadyEvery in the background, and refuses
// a request to a name that is not the server's (DNS rebinding) before the
// route table sees it. routes.go is that table: every pattern, who may call
// it (auth.go: anyone, the reads behind http.token unless
// http.public_reads, the changes behind http.token and from this origin),
// and the named method that answers it, in the file of its resource:
//
//	status.go     /healthz, /readyz, /api/status, /api/locks
//	runs.go       a job's history and the tick ledger (/api/jobs/{job}/history, .../ticks, /api/ticks)
//	controls.go   pause, resume, trigger and backfill of a job
//	schedules.go  the runtime schedules: list, get, put, delete
//	metrics.go    /metrics: baton.Replica.Stats as Prometheus metrics, read at scrape time
//	dashboard.go  the page (dashboard.html, embedded) and the queue view under /queues/
//
// A method of the JSON API returns a value or an error; api.go encodes the
// value and answers the error with the status that says whose fault it is,
// with secrets masked and, for reads, the Redis servers' addresses hidden.
package batonhttp
