package ddloffload

import (
	"reflect"
	"strings"
	"testing"

	"tableproxy/internal/configdoc"
	"tableproxy/plugins"
)

func TestOptionsDocumented(t *testing.T) {
	keys := map[string]reflect.Type{}
	configdoc.Keys(reflect.TypeOf(Options{}), "", keys)
	dataDir := t.TempDir()
	configdoc.CheckPlugin(t, Name, keys, dataDir, func(raw map[string]any) (any, error) {
		var o Options
		if err := plugins.DecodeOptions(raw, &o); err != nil {
			return nil, err
		}
		if err := o.setDefaults(dataDir); err != nil {
			return nil, err
		}
		// Sizes as the plugin uses them (sortMemory, ...), whatever their
		// spelling.
		o.SortMemory, o.DiskQuota, o.NativeBelow = "", "", nil
		return o, nil
	})
}

// A count set to 0 is refused, naming it, rather than taken as its
// default.
func TestZeroCountsRefused(t *testing.T) {
	for _, name := range []string{"workers", "chunk_rows", "cutover_attempts", "keep_jobs"} {
		err := CheckOptions(plugins.Options{name: 0})
		if err == nil || !strings.Contains(err.Error(), name+": 0: must be at least 1") {
			t.Errorf("%s: 0: %v", name, err)
		}
	}
	if err := CheckOptions(plugins.Options{"workers": 2}); err != nil {
		t.Errorf("workers: 2: %v", err)
	}
}
