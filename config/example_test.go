package config_test

import (
	"fmt"

	"github.com/batonhq/baton/config"
)

func ExampleLoad() {
	_, err := config.Load([]byte(`redis:
  url: redis://127.0.0.1:6379/0
jobs:
  - name: report
    schedule: "0 0 * *"
    exec: {command: [date]}
    timeout: 5 minutes
`))
	fmt.Println(err)
	// Output:
	// <input>:5: job "report": schedule: expected 5 or 6 fields, found 4
	// <input>:7: job "report": timeout: invalid duration "5 minutes"
}

func ExampleConfig_Retention() {
	cfg, err := config.Load([]byte(`redis:
  url: redis://127.0.0.1:6379/0
jobs:
  - name: report
    schedule: "*/5 * * * * *"
    starting_deadline: 10m
    exec: {command: [date]}
`))
	if err != nil {
		panic(err)
	}
	j, _ := cfg.Job("report")
	fmt.Println(cfg.Retention(j))
	// Output: 11m6s
}
