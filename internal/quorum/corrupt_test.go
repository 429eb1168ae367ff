package quorum

import "testing"

// ParseCounter reads a counter as the scripts' q_int does: a decimal
// integer from 0 to 2^53-2, no sign, no leading zero.
func TestParseCounterTakesOnlyExactFences(t *testing.T) {
	for s, want := range map[string]bool{
		"0": true, "1": true, "1764000000000000": true, "9007199254740990": true,
		"9007199254740991": false, "9007199254740992": false, "9223372036854775807": false,
		"99999999999999999999": false, "-5": false, "+5": false, "07": false, "1.5": false,
		"1e3": false, "abc": false, "": false, " 1": false, "1\x1b[2K": false,
	} {
		if _, ok := ParseCounter(s); ok != want {
			t.Errorf("ParseCounter(%q) ok = %v, want %v", s, ok, want)
		}
	}
}

// A marker whose fence floor is no counter is no marker (as q_guard reads
// it): the master is repaired, never fenced from it.
func TestMarkerWithCorruptFloorIsNoMarker(t *testing.T) {
	for _, v := range []string{"r 9223372036854775807 0", "r 9007199254740992 0 empty", "r -1 0", "r 1.5 0"} {
		if _, ok := parseMarker(v); ok {
			t.Errorf("parseMarker(%q) ok", v)
		}
	}
	if mk, ok := parseMarker("r 1764000000000000 0 fresh"); !ok || mk.floor != 1764000000000000 || !mk.fresh {
		t.Errorf("parseMarker of a good marker = %+v, %v", mk, ok)
	}
}
