package schedstore

import "github.com/batonhq/baton/config"

// keys are the keys of one shard of a namespace's runtime schedules, on the
// queue Redis, all in one hash slot so that a change is one script:
//
//	NS:{schedules}:defs  hash   id -> record (see record.go)
//	NS:{schedules}:ids   zset   every id, score 0: listed in id order
//	NS:{schedules}:log   stream one entry per change: ver, id, op (put|del)
//	NS:{schedules}:ver   string the number of changes made
//	NS:{schedules}:moving string, set while baton init moves the schedules
//	                      between shard counts: puts and deletes refuse
//	NS:{schedules}:restored hash id -> "seen|ver": the schedules replicas put
//	                      back or deleted again after Redis went back
//	                      (Follower); "*seen": the highest version of a copy
//	                      that claimed the restore; id -> "c|ver": deleted
//	                      by a caller since; kept a day
//
// With schedules.shards N > 1, shard K's keys carry the tag {schedules.K}
// instead (config.ScheduleKeys): a schedule lives in shard
// config.ScheduleShard(id, N), and a Redis Cluster spreads the shards over
// its slots.
type keys struct{ defs, ids, log, ver, moving, restored string }

func newKeys(ns string, shard, shards int) keys {
	p := config.ScheduleKeys(ns, shard, shards)
	return keys{defs: p + "defs", ids: p + "ids", log: p + "log", ver: p + "ver", moving: p + "moving", restored: p + "restored"}
}

func (k keys) all() []string { return []string{k.defs, k.ids, k.log, k.ver, k.moving} }

// Keys returns the keys of namespace ns's runtime schedules with shards
// shards, as docs/operating.md's key table lists them.
func Keys(ns string, shards int) []string {
	var out []string
	for k := range max(shards, 1) {
		k := newKeys(ns, k, shards)
		out = append(out, append(k.all(), k.restored)...)
	}
	return out
}

// marksKey is the hash of the marks (MasterMarks) on each lock master:
// NS:schedmarks, id -> mark; one for every shard, so that marks stay with
// their ids when baton init moves the schedules to another shard count.
func marksKey(ns string) string { return ns + ":schedmarks" }

// signedKey is the hash of the reservations (MasterMarks.Reserve) on each
// lock master: NS:schedsigned, id -> the highest created and version a put
// signed a definition of it for; one for every shard, as marksKey.
func signedKey(ns string) string { return ns + ":schedsigned" }
