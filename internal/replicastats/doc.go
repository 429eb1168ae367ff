// Package replicastats holds what a replica measures as things happen,
// without a metrics library: fixed-bucket histograms whose buckets count
// atomically, and families of them (or of counters and gauges) keyed by
// label values, created on the first observation.
//
// A replica records into them on its hot paths (a dispatch, the end of a
// run) and package baton reads them into Replica.Stats; the HTTP layer
// (package batonhttp) turns that snapshot into Prometheus metrics at scrape
// time. Nothing here locks on the hot path but the lookup of a label that
// is new.
package replicastats
