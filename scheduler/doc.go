// Package scheduler turns a job list into ticks and makes every tick of every
// job dispatch exactly once across any number of replicas.
//
// A tick's identity is (job, the UTC instant it is due), never the moment a
// replica noticed it: every replica computes the same ticks from the same
// spec, with @every aligned to the Unix epoch and daylight-saving days handled
// the way Vixie cron handles them. For each tick the replicas race through one
// atomic claim script on the lock masters; the winner enqueues the run into
// asynq under the task ID "job@tick" and commits the tick as done.
package scheduler
