package sizedlru

import "testing"

// The cache keeps within both bounds, evicting the least recently used
// first; an entry larger than the whole budget is not kept; replacing an
// entry counts only its new cost.
func TestBoundedByBytesAndEntries(t *testing.T) {
	c := New[string, int](100, 4)
	c.Add("a", 1, 40)
	c.Add("b", 2, 40)
	c.Get("a") // b is now the oldest
	c.Add("c", 3, 40)
	if _, ok := c.Get("b"); ok || c.Bytes() != 80 || c.Len() != 2 {
		t.Fatalf("after 120 bytes into 100: b kept %v, %d bytes, %d entries", ok, c.Bytes(), c.Len())
	}
	if c.Add("huge", 4, 101) || c.Bytes() != 80 {
		t.Fatalf("an entry over the budget was kept (%d bytes)", c.Bytes())
	}
	c.Add("a", 5, 10)
	if v, _ := c.Get("a"); v != 5 || c.Bytes() != 50 {
		t.Fatalf("replaced a: %d, %d bytes, want 5, 50", v, c.Bytes())
	}
	for _, k := range []string{"d", "e", "f", "g"} {
		c.Add(k, 0, 1)
	}
	if c.Len() != 4 || c.Bytes() != 4 {
		t.Fatalf("over the entry bound: %d entries, %d bytes", c.Len(), c.Bytes())
	}
	c.Remove("g")
	c.Purge()
	if c.Len() != 0 || c.Bytes() != 0 {
		t.Fatalf("purged: %d entries, %d bytes", c.Len(), c.Bytes())
	}
}
