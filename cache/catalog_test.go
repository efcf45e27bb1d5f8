package cache

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestCatalogSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	c, err := OpenCatalog(dir)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	for _, e := range []Entry{{Schema: "shop", Table: "rates", CachedBy: "ops", Since: now}, {Schema: "shop", Table: "branches", CachedBy: "ops", Since: now}} {
		if err := c.Put(e); err != nil {
			t.Fatal(err)
		}
	}
	if had, err := c.Delete(Entry{Schema: "shop", Table: "rates"}.ID()); !had || err != nil {
		t.Fatalf("delete: %v %v", had, err)
	}
	if had, _ := c.Delete(Entry{Schema: "shop", Table: "nope"}.ID()); had {
		t.Fatal("deleted a table that was not cached")
	}
	again, err := OpenCatalog(dir)
	if err != nil {
		t.Fatal(err)
	}
	list := again.List()
	if len(list) != 1 || list[0].Table != "branches" || list[0].CachedBy != "ops" || !list[0].Since.Equal(now) {
		t.Fatalf("reopened catalog: %+v", list)
	}
}

func TestCorruptCatalogIsAnError(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, catalogFile), []byte("{not json"), 0o600)
	if _, err := OpenCatalog(dir); err == nil {
		t.Fatal("corrupt catalog accepted")
	}
}

func TestFailedWriteLeavesCatalogUnchanged(t *testing.T) {
	dir := t.TempDir()
	c, _ := OpenCatalog(dir)
	if err := c.Put(Entry{Schema: "a", Table: "b"}); err != nil {
		t.Fatal(err)
	}
	// Make the directory unwritable: the next change must fail and leave
	// memory as it was (root ignores permissions, so remove the directory).
	os.RemoveAll(dir)
	if err := c.Put(Entry{Schema: "a", Table: "c"}); err == nil {
		t.Fatal("put into a missing directory succeeded")
	}
	if len(c.List()) != 1 {
		t.Fatalf("memory changed after a failed write: %+v", c.List())
	}
}
