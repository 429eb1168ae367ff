package config

import (
	"hash/fnv"
	"strconv"
	"strings"
)

// QueueName is the asynq queue of config queue q: the namespace, a colon,
// q. Deployments that share a Redis (staging and prod) never fetch or
// dedupe each other's tasks. With worker.lanes > 1 it is lane 0's.
func (c *Config) QueueName(q string) string { return c.Namespace + ":" + q }

// laneSep joins a queue and its lane in an asynq queue's name: a character
// no config queue name has.
const laneSep = "#"

// runtimeLane names the lane a runtime schedule's tasks take instead of
// lane 0: QueueName(q)#@.
const runtimeLane = "@"

// QueueFor is the asynq queue of job's tasks in config queue q: with
// worker.lanes N > 1, the tasks of a queue are spread over N asynq queues,
// each in a Redis Cluster slot of its own (QueueName(q), then
// QueueName(q)#1 to #N-1), a job's always in the same one
// (ScheduleShard(job, N)), so that a tick's task ID still dedupes it.
//
// A runtime schedule's tasks never go to lane 0, QueueName(q): releases
// without runtime schedules (0.1.0) consume that queue, and their workers
// archive a task of a job no replica's list has. Where its lane would be 0
// they go to QueueName(q)#@, a lane of their own.
func (c *Config) QueueFor(q, job string) string {
	if k := ScheduleShard(job, c.Worker.Lanes); k > 0 {
		return c.QueueName(q) + laneSep + strconv.Itoa(k)
	}
	if IsScheduleJob(job) {
		return c.QueueName(q) + laneSep + runtimeLane
	}
	return c.QueueName(q)
}

// QueueLanes are the asynq queues of config queue q: its worker.lanes lanes,
// and the runtime schedules' lane 0 (QueueFor).
func (c *Config) QueueLanes(q string) []string {
	out := []string{c.QueueName(q), c.QueueName(q) + laneSep + runtimeLane}
	for k := 1; k < c.Worker.Lanes; k++ {
		out = append(out, c.QueueName(q)+laneSep+strconv.Itoa(k))
	}
	return out
}

// QueueOf returns the config queue of asynq queue name (the inverse of
// QueueName and QueueFor: any lane's name gives its queue), and whether
// name is one of this namespace's.
func (c *Config) QueueOf(name string) (string, bool) {
	q, ours := strings.CutPrefix(name, c.Namespace+":")
	if i := strings.LastIndex(q, laneSep); ours && i >= 0 {
		q = q[:i]
	}
	return q, ours
}

// ScheduleShard returns the shard of runtime schedule id among shards
// (schedules.shards): FNV-1a of the id, so every replica and tool agrees.
func ScheduleShard(id string, shards int) int {
	if shards <= 1 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	return int(h.Sum32() % uint32(shards))
}

// ScheduleKeys is the prefix of the keys of shard shard of namespace ns's
// runtime schedules: NS:{schedules}: with one shard, else
// NS:{schedules.K}:, each shard in a hash slot of its own.
func ScheduleKeys(ns string, shard, shards int) string {
	if shards <= 1 {
		return ns + ":{schedules}:"
	}
	return ns + ":{schedules." + strconv.Itoa(shard) + "}:"
}

// ScheduleKeysOf is the prefix of the keys of runtime schedule id's shard
// (ScheduleKeys).
func (c *Config) ScheduleKeysOf(id string) string {
	return ScheduleKeys(c.Namespace, ScheduleShard(id, c.Schedules.Shards), c.Schedules.Shards)
}
