package schedule

import (
	"testing"
	"time"
)

// A union ticks at each of its members' ticks, once for an instant two
// share; Has tells whose tick an instant is.
func TestUnionTicksAtEveryMembersTicksOnce(t *testing.T) {
	hourly, _ := Parse("0 * * * *", time.UTC)
	half, _ := Parse("30 */2 * * *", time.UTC)
	daily, _ := Parse("0 0 * * *", time.UTC)
	u := Union{hourly, nil, half, daily}
	from := time.Date(2030, 1, 1, 23, 0, 0, 0, time.UTC)
	var got []string
	for at := u.Next(from); len(got) < 5; at = u.Next(at) {
		got = append(got, at.Format("15:04"))
	}
	if want := "[00:00 00:30 01:00 02:00 02:30]"; fmtList(got) != want {
		t.Errorf("ticks %v, want %s", got, want)
	}
	midnight := time.Date(2030, 1, 2, 0, 0, 0, 0, time.UTC)
	if !Has(hourly, midnight) || !Has(daily, midnight) || Has(half, midnight) || Has(nil, midnight) {
		t.Errorf("Has at midnight: hourly %v daily %v half %v", Has(hourly, midnight), Has(daily, midnight), Has(half, midnight))
	}
	if !(Union{}).Next(from).IsZero() {
		t.Errorf("an empty union ticks")
	}
}

func fmtList(s []string) string {
	out := "["
	for i, v := range s {
		if i > 0 {
			out += " "
		}
		out += v
	}
	return out + "]"
}
