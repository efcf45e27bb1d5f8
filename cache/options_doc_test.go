package cache

import (
	"context"
	"os"
	"reflect"
	"testing"

	"github.com/go-mysql-org/go-mysql/client"

	"tableproxy/binlog"
	"tableproxy/internal/configdoc"
	"tableproxy/plugins"
)

func TestOptionsDocumented(t *testing.T) {
	keys := map[string]reflect.Type{}
	configdoc.Keys(reflect.TypeOf(Options{}), "", keys)
	env := plugins.Env{Backend: optDocBackend{}, Binlog: &binlog.Follower{}}
	configdoc.CheckPlugin(t, Name, keys, t.TempDir(), func(raw map[string]any) (any, error) {
		opts, limit, err := parseOptions(raw, env)
		if err != nil {
			return nil, err
		}
		budget, entry, err := resultCacheSizes(opts)
		if err != nil {
			return nil, err
		}
		sizes, err := readMemorySizes(opts)
		if err != nil {
			return nil, err
		}
		// Sizes as the plugin uses them, whatever their spelling.
		opts.MaxTableSize, opts.ResultCacheSize, opts.ResultCacheEntryMax = "", "", ""
		opts.PlanCacheSize, opts.MetadataCacheSize, opts.MaxPlannedText = "", "", ""
		return []any{opts, limit, budget, entry, sizes}, nil
	})
}

// optDocBackend lets the options be parsed: it is never used.
type optDocBackend struct{}

func (optDocBackend) Connect(context.Context, string, string) (*client.Conn, error) {
	return nil, os.ErrInvalid
}
func (optDocBackend) AccountsChanged() {}
