// Package schedule reads baton's schedule specs into the ticks they yield:
// cron specs with an optional seconds field, descriptors (@daily, @every
// 5m), calendar days (L, D#N, DL, weekday 7), fixed instants, windows
// (Window, Once), the catch-up policy of the ticks a job missed
// (Catchup), a job's rule on days the clocks change (DST, ParseDST; Marks
// says how a change touched each tick), business calendars (Calendar,
// Days, OnDays), and H, a value picked from the job's name (Hashed). It is a leaf of the standard library and robfig/cron: the job
// list (package config), the scheduler and a program that only reads or
// checks specs share it without linking Redis clients or exporters.
//
// Every replica must compute the same ticks, so a Schedule depends only on
// its spec, its zone and the instant it is given.
package schedule
