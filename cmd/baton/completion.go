package main

import (
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"
)

// jobNames completes job names from the config the command would read
// (--config, else $BATON_CONFIG, else baton.yaml): the names not given
// yet that start with what is typed. atMost > 0 completes only the first
// atMost positional arguments; -1 completes a flag's value.
func jobNames(atMost int) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if atMost > 0 && len(args) >= atMost {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []cobra.Completion
		for _, name := range configJobNames(configPath(cmd)) {
			if strings.HasPrefix(name, toComplete) && (atMost < 0 || !slices.Contains(args, name)) {
				out = append(out, name)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
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

// configJobNames reads the job names of the config file path, without
// validating it or expanding its variables (completion must not need the
// secrets a job's ${VAR} names); nil when it cannot be read.
func configJobNames(path string) []string {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var doc struct {
		Jobs []struct {
			Name string `yaml:"name"`
		} `yaml:"jobs"`
	}
	if yaml.Unmarshal(data, &doc) != nil {
		return nil
	}
	var names []string
	for _, j := range doc.Jobs {
		if j.Name != "" {
			names = append(names, j.Name)
		}
	}
	return names
}
