package ddloffload

import (
	"reflect"
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
