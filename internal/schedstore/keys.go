package schedstore

// keys are the keys of a namespace's runtime schedules, on the queue Redis,
// all in one hash slot so that a change is one script:
//
//	NS:{schedules}:defs  hash   id -> record (see record.go)
//	NS:{schedules}:ids   zset   every id, score 0: listed in id order
//	NS:{schedules}:log   stream one entry per change: ver, id, op (put|del)
//	NS:{schedules}:ver   string the number of changes made
type keys struct{ defs, ids, log, ver string }

func newKeys(ns string) keys {
	p := ns + ":{schedules}:"
	return keys{defs: p + "defs", ids: p + "ids", log: p + "log", ver: p + "ver"}
}

func (k keys) all() []string { return []string{k.defs, k.ids, k.log, k.ver} }

// Keys returns the keys of namespace ns's runtime schedules, as
// docs/operating.md's key table lists them.
func Keys(ns string) []string { return newKeys(ns).all() }
