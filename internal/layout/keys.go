package layout

// Key is the hash that records namespace ns's layout, on the queue Redis:
// fields shards and lanes, and moving_to while baton init moves the
// runtime schedules.
func Key(ns string) string { return ns + ":layout" }

// lockKey is the lock one baton init at a time holds while it changes
// namespace ns's layout: a token, with a ttl it extends as it works.
func lockKey(ns string) string { return ns + ":layout:init" }
