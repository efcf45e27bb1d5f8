package proxy

import (
	"bytes"
	"testing"
)

// A progress report is laid out as MariaDB's server sends it, and the
// relay's own test for one recognizes it.
func TestAppendProgress(t *testing.T) {
	got := appendProgress(nil, 4, 10, 37.5, "backfill")
	want := []byte{0xff, 0xff, 0xff, 1, 4, 10, 0x7c, 0x92, 0x00, 8, 'b', 'a', 'c', 'k', 'f', 'i', 'l', 'l'} // 37500
	if !bytes.Equal(got, want) {
		t.Errorf("appendProgress = % x, want % x", got, want)
	}
	if !isProgressReport(got) {
		t.Errorf("not recognized as a progress report")
	}
	// Out-of-range values are clamped: stage at least 1, max stage at
	// least the stage, percent within 0..100.
	got = appendProgress(nil, 0, 0, 250, "")
	if got[4] != 1 || got[5] != 1 || got[6] != 0xa0 || got[7] != 0x86 || got[8] != 0x01 { // 100000
		t.Errorf("clamped report: % x", got)
	}
}
