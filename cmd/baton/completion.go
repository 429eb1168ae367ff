package main

import (
	"context"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/config"
)

// jobNames completes job names from the config the command would read
// (--config, else $BATON_CONFIG, else baton.yaml): the names not given
// yet that start with what is typed, of the jobs the command takes
// (accepts their mode; nil: all). What starts with "@" completes runtime
// schedules' job names from Redis. atMost > 0 completes only the first
// atMost positional arguments; -1 completes a flag's value.
func jobNames(atMost int, accepts func(mode string) bool) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if atMost > 0 && len(args) >= atMost {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		if id, ok := strings.CutPrefix(toComplete, "@"); ok {
			return scheduleCompletions(cmd, args, id, "@"), cobra.ShellCompDirectiveNoFileComp
		}
		var out []cobra.Completion
		for _, j := range configJobs(configPath(cmd)) {
			if strings.HasPrefix(j.Name, toComplete) && (atMost < 0 || !slices.Contains(args, j.Name)) && (accepts == nil || accepts(j.Mode)) {
				out = append(out, j.Name)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// withTicks accepts the jobs that have ticks: not singletons (trigger,
// ticks, backfill, pause and resume refuse them).
func withTicks(mode string) bool { return mode != "singleton" }

// scheduleIDs completes runtime schedule ids (baton schedules get, delete,
// pause, resume) from Redis, as jobNames does job names.
func scheduleIDs(atMost int) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if atMost > 0 && len(args) >= atMost {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return scheduleCompletions(cmd, args, toComplete, ""), cobra.ShellCompDirectiveNoFileComp
	}
}

// completionBound bounds the Redis reads of a completion: a shell waits.
const completionBound = time.Second

// scheduleCompletions reads the first 100 runtime schedules whose id
// starts with prefix, as name (before each id) + id, not given yet in
// args; none when the config or Redis cannot be read in completionBound.
func scheduleCompletions(cmd *cobra.Command, args []string, prefix, name string) []cobra.Completion {
	cfg, err := config.LoadFile(configPath(cmd))
	if err != nil {
		return nil
	}
	c, err := baton.NewCluster(cfg)
	if err != nil {
		return nil
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), completionBound)
	defer cancel()
	page, err := c.ListSchedules(ctx, baton.ScheduleQuery{Prefix: prefix, Limit: 100})
	if err != nil {
		return nil
	}
	var out []cobra.Completion
	for _, s := range page.Schedules {
		if !slices.Contains(args, name+s.ID) {
			out = append(out, name+s.ID)
		}
	}
	return out
}

// configPath is the config file cmd would read.
func configPath(cmd *cobra.Command) string {
	if f := cmd.Flags().Lookup("config"); f != nil && f.Changed {
		return f.Value.String()
	}
	if p, ok := os.LookupEnv(envConfig); ok {
		return p
	}
	return defaultConfigFile
}

// configJob is a job of the config file as completion reads it.
type configJob struct {
	Name string `yaml:"name"`
	Mode string `yaml:"mode"`
}

// configJobs reads the jobs of the config file path, without validating
// it or expanding its variables (completion must not need the secrets a
// job's ${VAR} names); nil when it cannot be read.
func configJobs(path string) []configJob {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var doc struct {
		Jobs []configJob `yaml:"jobs"`
	}
	if yaml.Unmarshal(data, &doc) != nil {
		return nil
	}
	var out []configJob
	for _, j := range doc.Jobs {
		if j.Name != "" {
			out = append(out, j)
		}
	}
	return out
}
