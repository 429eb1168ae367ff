package config

import (
	"slices"
	"testing"
)

// A runtime schedule's tasks never go to lane 0 (NS:QUEUE), the one asynq
// queue of a config queue that releases without runtime schedules (0.1.0)
// consume: such a worker would fetch a task of a job it cannot know and
// archive it. They go to a lane of their own, which this release's workers
// consume with the queue's others; the list's jobs stay where they were.
func TestRuntimeScheduleTasksGoToALaneNoEarlierReleaseConsumes(t *testing.T) {
	for _, lanes := range []int{1, 2, 4} {
		c := &Config{Namespace: "ns", Worker: WorkerConfig{Lanes: lanes}}
		for _, id := range []string{"a", "b", "tenant-1", "tenant-2", "report/tenant-42", "x"} {
			job := ScheduleJobName(id)
			got := c.QueueFor("default", job)
			if got == c.QueueName("default") {
				t.Errorf("lanes %d: %s's tasks go to %s, which releases without runtime schedules consume", lanes, job, got)
			}
			if !slices.Contains(c.QueueLanes("default"), got) {
				t.Errorf("lanes %d: %s's tasks go to %s, not one of the queue's lanes %v", lanes, job, got, c.QueueLanes("default"))
			}
			if q, ours := c.QueueOf(got); q != "default" || !ours {
				t.Errorf("lanes %d: QueueOf(%s) = %q, %v", lanes, got, q, ours)
			}
		}
		if lanes == 1 {
			if got := c.QueueFor("default", "listed"); got != "ns:default" {
				t.Errorf("a list job's tasks go to %s, want ns:default (where earlier releases put and fetch them)", got)
			}
		}
	}
}
