package cache

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"tableproxy/internal/atomicfile"
	"tableproxy/lease"
)

// Entry is one cached table in the catalog.
type Entry struct {
	Schema   string    `json:"schema"`
	Table    string    `json:"table"`
	CachedBy string    `json:"cached_by"` // the admin who ran ALTER TABLE ... CACHE; loads run as this user
	Since    time.Time `json:"since"`
	// Index is the cluster log's index of the entry that cached the
	// table; Pending, that not every proxy has learned of it yet, and no
	// proxy serves it from memory (see learn.go).
	Index   uint64 `json:"index,omitempty"`
	Pending bool   `json:"pending,omitempty"`
}

// ID is the entry's table.
func (e Entry) ID() lease.TableID { return lease.TableID{Schema: e.Schema, Table: e.Table} }

// Catalog is the durable list of cached tables: which tables are cached
// survives a restart. On one proxy it is a file in the data directory,
// replaced atomically on every change; a cluster keeps it in its replicated
// log instead.
type Catalog struct {
	path string

	mu      sync.Mutex // guards entries and the file
	entries map[lease.TableID]Entry
}

const catalogFile = "cached_tables.json"

// OpenCatalog reads the catalog in dir, or starts an empty one.
func OpenCatalog(dir string) (*Catalog, error) {
	c := &Catalog{path: filepath.Join(dir, catalogFile), entries: map[lease.TableID]Entry{}}
	var list []Entry
	if _, err := atomicfile.ReadJSON(c.path, &list); err != nil {
		return nil, fmt.Errorf("cache catalog: %w", err)
	}
	for _, e := range list {
		c.entries[e.ID()] = e
	}
	return c, nil
}

// Get returns the entry for id, if the table is cached.
func (c *Catalog) Get(id lease.TableID) (Entry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[id]
	return e, ok
}

// List returns the entries ordered by schema and table.
func (c *Catalog) List() []Entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sortedLocked()
}

func (c *Catalog) sortedLocked() []Entry {
	list := make([]Entry, 0, len(c.entries))
	for _, e := range c.entries {
		list = append(list, e)
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].Schema != list[j].Schema {
			return list[i].Schema < list[j].Schema
		}
		return list[i].Table < list[j].Table
	})
	return list
}

// Put adds or replaces an entry and makes it durable before returning.
func (c *Catalog) Put(e Entry) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	old, had := c.entries[e.ID()]
	c.entries[e.ID()] = e
	if err := c.saveLocked(); err != nil {
		if had {
			c.entries[e.ID()] = old
		} else {
			delete(c.entries, e.ID())
		}
		return err
	}
	return nil
}

// Delete removes id and makes that durable before returning. It reports
// whether the table was cached.
func (c *Catalog) Delete(id lease.TableID) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old, had := c.entries[id]
	if !had {
		return false, nil
	}
	delete(c.entries, id)
	if err := c.saveLocked(); err != nil {
		c.entries[id] = old
		return true, err
	}
	return true, nil
}

// saveLocked writes the catalog to a temporary file, syncs it, and renames
// it over the old one, so a crash leaves either the old or the new catalog.
func (c *Catalog) saveLocked() error {
	data, err := json.MarshalIndent(c.sortedLocked(), "", "  ")
	if err != nil {
		return err
	}
	tmp := c.path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("cache catalog: %w", err)
	}
	if _, err := f.Write(append(data, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("cache catalog: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("cache catalog: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("cache catalog: %w", err)
	}
	if err := os.Rename(tmp, c.path); err != nil {
		return fmt.Errorf("cache catalog: %w", err)
	}
	if d, err := os.Open(filepath.Dir(c.path)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}
