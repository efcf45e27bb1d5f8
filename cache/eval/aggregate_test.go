package eval

import (
	"math/big"
	"testing"
)

func TestAverage(t *testing.T) {
	cases := []struct {
		sum   int64
		count int64
		scale int
		want  string
	}{
		{3, 2, 4, "1.5000"}, {-5, 2, 4, "-2.5000"}, {1, 3, 4, "0.3333"}, {2, 3, 4, "0.6667"},
		{-2, 3, 4, "-0.6667"}, {5, 2, 0, "3"}, {-5, 2, 0, "-3"}, {0, 7, 4, "0.0000"},
		{-1, 300000, 4, "0.0000"}, {1, 20000, 4, "0.0001"},
	}
	for _, c := range cases {
		if got := string(average(big.NewInt(c.sum), c.count, c.scale)); got != c.want {
			t.Errorf("average(%d, %d, %d) = %s, want %s", c.sum, c.count, c.scale, got, c.want)
		}
	}
}
