// Package handoff hands a scheduler's ticks to whoever runs them: a
// cron-mode tick becomes an asynq task in its job's queue, a local-mode tick
// a run in this process (LocalRunner). Sender implements the scheduler's
// Dispatcher and Recorder.
//
// handoff.go is the hand-off itself: one task ID per tick, so asynq refuses
// a second enqueue of it; a tick's binding to one queue while replicas with
// different job lists route its job differently (a rolling deploy); the
// max_runs counts; and the history records of manual dispatches and of
// ticks that did not run.
//
// task.go is the task the workers receive: its JSON payload (the tick,
// never the fence), its asynq options (timeout, retries, retention), the
// window it may still start in (RunWindow, TickBound: a worker refuses an
// older task as a replay) and the retry delays it spans. sign.go signs the
// payload, and the worker's replace requests, with security.signing_keys;
// a worker runs only what its keys signed. keys.go builds every key the
// hand-off writes on the queue Redis, and asynq's keys it reads.
package handoff
