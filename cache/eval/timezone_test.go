package eval

import "testing"

func TestFixedOffset(t *testing.T) {
	cases := []struct {
		tz, system string
		off        int
		ok         bool
	}{
		{"SYSTEM", "UTC", 0, true}, {"SYSTEM", "CET", 0, false},
		// A system zone of "GMT" may be Europe/London, which is on BST half
		// the year.
		{"SYSTEM", "GMT", 0, false}, {"GMT", "CET", 0, true}, {"+00:00", "", 0, true},
		{"-07:00", "", -7 * 3600, true}, {"+5:45", "", 5*3600 + 45*60, true}, {"+14:00", "", 14 * 3600, true},
		{"Europe/Paris", "", 0, false}, {"+1:2", "", 0, false}, {"+15:00", "", 0, false}, {"UTC", "", 0, true},
	}
	for _, c := range cases {
		off, ok := FixedOffset(c.tz, c.system)
		if off != c.off || ok != c.ok {
			t.Errorf("fixedOffset(%q, %q) = %d, %v; want %d, %v", c.tz, c.system, off, ok, c.off, c.ok)
		}
	}
}

func TestShiftTimestamp(t *testing.T) {
	cases := []struct {
		in   string
		off  int
		want string
	}{
		{"2026-03-01 01:30:00", -7 * 3600, "2026-02-28 18:30:00"},
		{"2024-02-28 23:00:00.123456", 3600, "2024-02-29 00:00:00.123456"},
		{"1970-01-01 00:00:01", -3600, "1969-12-31 23:00:01"},
		{"0000-00-00 00:00:00", 3600, "0000-00-00 00:00:00"},
		{"2038-01-19 03:14:07", 5*3600 + 45*60, "2038-01-19 08:59:07"},
	}
	for _, c := range cases {
		got, ok := ShiftTimestamp(nil, []byte(c.in), c.off)
		if !ok || string(got) != c.want {
			t.Errorf("shiftTimestamp(%q, %d) = %q, %v; want %q", c.in, c.off, got, ok, c.want)
		}
	}
	if _, ok := ShiftTimestamp(nil, []byte("2026-03-01"), 0); ok {
		t.Error("a value without a time must be refused")
	}
}
