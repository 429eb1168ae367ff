// Package batontest tests a program's baton jobs — its Go handlers and its
// job list — in a few lines, on a fake clock:
//
//	func TestReport(t *testing.T) {
//		reg := jobs.NewRegistry()
//		_ = reg.HandleFunc("report", buildReport)
//		env := batontest.Load(t, jobsYAML, batontest.WithHandlers(reg),
//			batontest.WithStart(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)))
//		env.AdvanceTo(t, time.Date(2030, 1, 1, 2, 0, 0, 0, time.UTC))
//		env.RequireDispatched(t, "report", time.Date(2030, 1, 1, 1, 0, 0, 0, time.UTC))
//	}
//
// An Env is one baton replica (scheduler and worker, built by baton.New as a
// program builds its own) whose scheduler reads a fake clock that only
// AdvanceTo and Advance move. Moving it fires every due tick of every job in
// between, one instant after the other, through the real path: the claim
// script on Redis, the dispatcher's asynq enqueue, the worker's execution
// lease and the handler. AdvanceTo returns once each of those ticks is
// settled: dispatched and its run's first attempt finished, or recorded as
// not dispatched (paused, missed). What the helpers check is the job's run
// history, as `baton history` shows it.
//
// # Redis and time
//
// By default the Env runs on an embedded Redis-compatible server (miniredis,
// in memory, one per Env) whose clock is the fake one: Redis TIME, which the
// claim compares ticks with, answers the fake time, and keys expire as the
// fake clock passes them. Any start date works, past or future.
//
// WithRedis runs the Env on a real Redis instead (a throwaway one: a test
// server, not production). Redis TIME cannot be faked there, and the claim
// refuses ticks older than their starting deadline by Redis TIME. So on a
// real Redis the fake clock must not fall behind Redis TIME: it starts at
// Redis TIME or later (New fails the test otherwise) and runs ahead of it,
// and a test that spends more real time than a job's starting deadline
// between two moves of the clock finds that job's ticks missed. Each Env on a
// real Redis uses a namespace of its own (the config's, plus a random
// suffix) and deletes its keys when the test ends.
//
// In both modes the Env raises the config's max_clock_skew to MaxAhead: the
// claim refuses ticks further ahead of Redis TIME than that bound, and the
// worker refuses ticks further ahead of the machine's clock, both of which
// the fake clock is on a real Redis (and the worker's clock is real in both
// modes). The skew check, which stops a replica whose clock is off, is thus
// off in an Env. Tick records and completed tasks are kept that much longer.
//
// # What else differs from a deployment
//
// The Env is a single replica named "batontest" with an idle poll of 10ms,
// a history of up to 100,000 runs per job with every start written as the run
// starts (history.start_after 0: a stuck handler shows as running), and locking.fresh_deployment on.
// Only the scheduler runs on the fake clock: handlers, leases, asynq's
// retries and backoffs run in real time, so a failed run's retry comes
// after its backoff whatever the fake clock says, and AdvanceTo waits for
// first attempts only. Exec jobs run under a supervisor, the test binary
// itself: a test of exec jobs calls baton.MaybeRunSupervisor first thing
// in TestMain. Jobs with leader: true are claimed only by the cluster's
// leader: New returns once the Env's replica leads. Singleton jobs have no
// ticks and run as they do in a deployment.
//
// # Runtime schedules
//
// PutSchedule puts a runtime schedule (baton.Cluster.PutSchedule) and
// returns once the Env's replica follows it; it starts from its put
// instant by the fake clock (the embedded server's Redis TIME is the fake
// clock's), and AdvanceTo settles its ticks like the job list's. Its job
// is named "@" + its id (config.ScheduleJobName) in the Require helpers and
// the history; each keeps up to 100,000 runs too. DeleteSchedule deletes
// one. The definition is checked with the max_clock_skew the config was
// loaded with, not MaxAhead.
//
// Everything an Env started stops when the test ends (t.Cleanup): the
// replica shuts down as baton.Replica.Run describes, then the server.
package batontest
