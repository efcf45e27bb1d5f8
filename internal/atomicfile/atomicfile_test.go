package atomicfile

import (
	"path/filepath"
	"strings"
	"testing"
)

// What Write leaves, ReadJSON reads back; a missing file is an empty
// start, and a damaged one an error that names it.
func TestReadJSON(t *testing.T) {
	path := filepath.Join(t.TempDir(), "list.json")
	var list []string
	if found, err := ReadJSON(path, &list); found || err != nil || list != nil {
		t.Fatalf("missing file: found %v, %v, %v", found, list, err)
	}
	if err := Write(path, []byte(`["a","b"]`), 0o600); err != nil {
		t.Fatal(err)
	}
	if found, err := ReadJSON(path, &list); !found || err != nil || strings.Join(list, ",") != "a,b" {
		t.Fatalf("after Write: found %v, %v, %v", found, list, err)
	}
	if err := Write(path, []byte(`["a",`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadJSON(path, &list); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("damaged file: %v, want an error naming %s", err, path)
	}
}
