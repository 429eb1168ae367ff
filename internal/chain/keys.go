package chain

import (
	"strconv"
	"time"
)

// Key is the outcome record of job's tick at.
func Key(ns, job string, at time.Time) string {
	return ns + ":{" + job + "}:outcome:" + strconv.FormatInt(at.UnixMilli(), 10)
}
