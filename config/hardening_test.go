package config_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/batonhq/baton/config"
)

// A number from ${VAR} in a handler payload (a PIN) is masked in the printed
// config like any other value from the environment.
func TestNumericSecretInPayloadMasked(t *testing.T) {
	t.Setenv("BATON_R9_PIN", "424242")
	cfg, err := config.Load([]byte("redis: {url: \"redis://127.0.0.1:6379/0\"}\njobs:\n  - name: job\n    schedule: \"@every 1m\"\n    handler:\n      name: job\n      payload:\n        pin: ${BATON_R9_PIN}\n"))
	if err != nil {
		t.Fatal(err)
	}
	out := cfg.Redacted()
	if strings.Contains(out, "424242") {
		t.Errorf("the printed config shows a value from ${BATON_R9_PIN}:\n%s", out)
	}
}

// max_tick_records counts the ticks of the busiest retention span, not
// retention / shortest interval: a business-hours poll is not charged for
// nights and weekends.
func TestMaxTickRecordsCountsTheBusiestSpan(t *testing.T) {
	_, err := config.Load([]byte("redis: {url: \"redis://127.0.0.1:6379/0\"}\njobs:\n  - name: poll\n    schedule: \"*/10 * 9-16 * * 1-5\"\n    starting_deadline: 60h\n    handler: {name: poll}\n"))
	if err != nil {
		t.Errorf("a job whose records never exceed 8640 refused: %v", err)
	}
}

// One 200 KiB script anchored once and used by 100 jobs (what anchors are
// for) is within the alias bound.
func TestAliasByteBoundAllowsASharedScript(t *testing.T) {
	script := strings.Repeat("echo line of a long maintenance script\n", 200<<10/40)
	var b strings.Builder
	b.WriteString("redis: {url: \"redis://127.0.0.1:6379/0\"}\njobs:\n  - name: maint\n    schedule: \"@daily\"\n    exec:\n      command:\n        - sh\n        - -c\n        - &maint |\n")
	for l := range strings.Lines(script) {
		b.WriteString("          " + l)
	}
	for i := range 100 {
		b.WriteString("  - name: j" + strconv.Itoa(i) + "\n    schedule: \"@hourly\"\n    exec: {command: [\"sh\", \"-c\", *maint]}\n")
	}
	_, err := config.Load([]byte(b.String()))
	if err != nil {
		t.Errorf("a %d KiB file with one shared script refused: %v", b.Len()>>10, err)
	}
}
