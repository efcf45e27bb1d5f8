// Package sizedlru is a least-recently-used cache bounded by the bytes its
// entries hold, not only by their number: a cache keyed by what clients
// send (statement texts) must not grow with how long those texts are.
package sizedlru

import (
	"sync"
	"sync/atomic"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// Cache holds at most maxEntries entries whose costs sum to at most
// maxBytes; adding past either evicts the least recently used. An entry
// costing more than maxBytes is not kept. Safe for concurrent use.
type Cache[K comparable, V any] struct {
	mu       sync.Mutex
	lru      *simplelru.LRU[K, entry[V]]
	bytes    int64
	maxBytes int64
	// Evictions counts entries dropped to stay within the bounds;
	// Refused, entries too large to keep at all.
	Evictions atomic.Uint64
	Refused   atomic.Uint64
}

type entry[V any] struct {
	v    V
	cost int64
}

// New makes a cache of at most maxEntries entries and maxBytes bytes.
func New[K comparable, V any](maxBytes int64, maxEntries int) *Cache[K, V] {
	c := &Cache[K, V]{maxBytes: maxBytes}
	c.lru, _ = simplelru.NewLRU[K, entry[V]](max(maxEntries, 1), func(_ K, e entry[V]) {
		c.bytes -= e.cost
	})
	return c
}

// Get returns k's value and marks it recently used.
func (c *Cache[K, V]) Get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.lru.Get(k)
	return e.v, ok
}

// Add stores v under k at cost bytes, evicting the least recently used
// entries as the bounds require. It reports whether v was kept.
func (c *Cache[K, V]) Add(k K, v V, cost int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cost > c.maxBytes {
		c.lru.Remove(k)
		c.Refused.Add(1)
		return false
	}
	if old, ok := c.lru.Peek(k); ok {
		c.bytes -= old.cost // (replaced in place: no eviction callback)
	}
	if c.lru.Add(k, entry[V]{v: v, cost: cost}) {
		c.Evictions.Add(1)
	}
	c.bytes += cost
	for c.bytes > c.maxBytes {
		if _, _, ok := c.lru.RemoveOldest(); !ok {
			break
		}
		c.Evictions.Add(1)
	}
	return true
}

// Remove drops k.
func (c *Cache[K, V]) Remove(k K) {
	c.mu.Lock()
	c.lru.Remove(k)
	c.mu.Unlock()
}

// Purge drops every entry.
func (c *Cache[K, V]) Purge() {
	c.mu.Lock()
	c.lru.Purge()
	c.mu.Unlock()
}

// Len is the number of entries; Bytes, the sum of their costs.
func (c *Cache[K, V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}

func (c *Cache[K, V]) Bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}

// MaxBytes is the bound on Bytes.
func (c *Cache[K, V]) MaxBytes() int64 { return c.maxBytes }
