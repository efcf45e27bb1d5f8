package eval

import (
	"time"
)

// TIMESTAMP values. The backend stores a TIMESTAMP as an instant and shows
// it in the session's time_zone. The loader reads tables with time_zone
// '+00:00', so a snapshot holds TIMESTAMPs in UTC; a session whose zone is
// a fixed offset (time_zone '+05:30', or UTC by name, or SYSTEM on a server
// whose system zone is UTC) is sent them shifted by that offset. Zones with
// daylight saving or other rules are the backend's to apply: reads of
// TIMESTAMP columns in such sessions go to the backend.

// LoaderTimeZone is the time_zone the loader reads tables in.
const LoaderTimeZone = "+00:00"

// FixedOffset returns the offset from UTC, in seconds, of a session whose
// @@time_zone is tz on a server whose @@system_time_zone is system, when
// that offset is fixed.
func FixedOffset(tz, system string) (int, bool) {
	if tz == "SYSTEM" {
		// @@system_time_zone is the zone's abbreviation when the server
		// started: "GMT" may be Europe/London in winter, so only UTC is
		// taken for a fixed zone.
		if system != "UTC" {
			return 0, false
		}
		tz = system
	}
	switch tz {
	case "UTC", "GMT", "Etc/UTC", "Etc/GMT", "Universal", "Zulu":
		return 0, true
	}
	// [+-]H[H]:MM, as MariaDB and MySQL accept it.
	if len(tz) < 5 || len(tz) > 6 || (tz[0] != '+' && tz[0] != '-') {
		return 0, false
	}
	hm := tz[1:]
	if len(hm) == 4 {
		hm = "0" + hm
	}
	h, ok1 := digits([]byte(hm), 0, 2)
	m, ok2 := digits([]byte(hm), 3, 2)
	if !ok1 || !ok2 || hm[2] != ':' || m > 59 || h > 14 {
		return 0, false
	}
	off := h*3600 + m*60
	if tz[0] == '-' {
		off = -off
	}
	return off, true
}

// ShiftTimestamp appends the UTC TIMESTAMP text v (YYYY-MM-DD hh:mm:ss
// with an optional fraction) shifted by off seconds, as the backend would
// print it; the zero value stays zero.
func ShiftTimestamp(b, v []byte, off int) ([]byte, bool) {
	if len(v) < 19 || v[4] != '-' || v[7] != '-' || v[10] != ' ' || v[13] != ':' || v[16] != ':' {
		return b, false
	}
	y, ok1 := digits(v, 0, 4)
	mo, ok2 := digits(v, 5, 2)
	d, ok3 := digits(v, 8, 2)
	h, ok4 := digits(v, 11, 2)
	mi, ok5 := digits(v, 14, 2)
	s, ok6 := digits(v, 17, 2)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !ok6 {
		return b, false
	}
	if y == 0 && mo == 0 && d == 0 && h == 0 && mi == 0 && s == 0 {
		return append(b, v...), true // 0000-00-00 00:00:00 in every zone
	}
	t := time.Date(y, time.Month(mo), d, h, mi, s, 0, time.UTC).Add(time.Duration(off) * time.Second)
	b = t.AppendFormat(b, "2006-01-02 15:04:05")
	return append(b, v[19:]...), true // the fraction is the same in every zone
}
