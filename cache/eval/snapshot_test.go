package eval

import "testing"

// TestKeySearches checks the primary-key searches against a linear scan,
// over negative, zero and positive keys with gaps, for every probe between
// and beyond them.
func TestKeySearches(t *testing.T) {
	var s Snapshot
	for _, k := range []int64{-9, -4, -1, 0, 1, 2, 5, 6, 30, 31, 1000} {
		s.pkNums = append(s.pkNums, numOf(k))
	}
	for _, n := range []int{0, 1, 2, len(s.pkNums)} {
		sub := Snapshot{pkNums: s.pkNums[:n]}
		for k := int64(-12); k <= 1002; k++ {
			v := numOf(k)
			wantLo, wantHi := 0, 0
			for _, p := range sub.pkNums {
				if p.Cmp(v) < 0 {
					wantLo++
				}
				if p.Cmp(v) <= 0 {
					wantHi++
				}
			}
			if lo := sub.lowerBound(v); lo != wantLo {
				t.Fatalf("%d keys: lowerBound(%d) = %d, want %d", n, k, lo, wantLo)
			}
			if hi := sub.upperBound(v); hi != wantHi {
				t.Fatalf("%d keys: upperBound(%d) = %d, want %d", n, k, hi, wantHi)
			}
			if lo, hi := sub.equalRange(v); lo != wantLo || hi != wantHi {
				t.Fatalf("%d keys: equalRange(%d) = [%d, %d), want [%d, %d)", n, k, lo, hi, wantLo, wantHi)
			}
		}
	}
}

func numOf(k int64) num {
	if k < 0 {
		return num{neg: true, mag: uint64(-k)}
	}
	return num{mag: uint64(k)}
}
