package eval

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSortPackedIsTheStableSort: the packed sort gives the permutation the
// stable sort by the same key gives, NULLs first ascending and last
// descending, ties in their original order.
func TestSortPackedIsTheStableSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 500 {
		n := rng.IntN(300)
		span := uint64(1 + rng.IntN(20)) // few distinct values: many ties
		if round%5 == 0 {
			span = 1 << 31
		}
		keys := make([]sortKey, n)
		for i := range keys {
			if rng.IntN(8) == 0 {
				keys[i].null = true
				continue
			}
			keys[i].n = num{mag: rng.Uint64N(span)}
		}
		for _, desc := range []bool{false, true} {
			want := identity(n)
			slices.SortStableFunc(want, func(a, b int) int {
				ka, kb := keys[a], keys[b]
				var c int
				switch {
				case ka.null && kb.null:
				case ka.null:
					c = -1
				case kb.null:
					c = 1
				default:
					c = ka.n.Cmp(kb.n)
				}
				if desc {
					c = -c
				}
				return c
			})
			got := identity(n)
			if !sortPacked(got, keys, desc) {
				t.Fatalf("round %d: refused keys that fit", round)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("round %d, desc %v: got %v, want %v", round, desc, got, want)
			}
		}
	}
}

// TestSortPackedRefusesKeysThatDoNotFit: a negative key or one of 31 bits
// or more leaves the order to the comparison sort.
func TestSortPackedRefusesKeysThatDoNotFit(t *testing.T) {
	for _, k := range []num{{neg: true, mag: 1}, {mag: 1 << 31}, {mag: 1 << 40}} {
		keys := []sortKey{{n: num{mag: 3}}, {n: k}}
		perm := identity(2)
		if sortPacked(perm, keys, false) {
			t.Errorf("key %+v: sorted, want refused", k)
		}
		if !slices.Equal(perm, []int{0, 1}) {
			t.Errorf("key %+v: perm changed to %v", k, perm)
		}
	}
}

func identity(n int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	return p
}
