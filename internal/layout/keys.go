package layout

// Key is the hash that records namespace ns's layout, on the queue Redis:
// fields shards and lanes.
func Key(ns string) string { return ns + ":layout" }
