package plugins

import (
	"io"
	"log/slog"
	"reflect"
	"testing"
	"time"

	"tableproxy/internal/configdoc"
)

func TestOptionsDocumented(t *testing.T) {
	t.Run("metrics", func(t *testing.T) {
		keys := map[string]reflect.Type{}
		configdoc.Keys(reflect.TypeOf(metricsOptions{}), "", keys)
		configdoc.CheckPlugin(t, "metrics", keys, t.TempDir(), func(raw map[string]any) (any, error) {
			var o metricsOptions
			if err := DecodeOptions(raw, &o); err != nil {
				return nil, err
			}
			if o.Buckets == nil { // as newMetrics
				return defaultDurationBuckets, nil
			}
			return o.Buckets, nil
		})
	})
	t.Run("querylog", func(t *testing.T) {
		keys := map[string]reflect.Type{}
		configdoc.Keys(reflect.TypeOf(queryLogOptions{}), "", keys)
		env := Env{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
		configdoc.CheckPlugin(t, "querylog", keys, t.TempDir(), func(raw map[string]any) (any, error) {
			q, err := newQueryLogPlugin(raw, env, time.Now)
			if err != nil {
				return nil, err
			}
			defer q.Close()
			return []any{q.threshold, q.literals, q.maxLen, q.limit, q.file != nil}, nil
		})
	})
	t.Run("firewall", func(t *testing.T) {
		keys := map[string]reflect.Type{}
		configdoc.Keys(reflect.TypeOf(firewallOptions{}), "", keys)
		configdoc.Keys(reflect.TypeOf(firewallRuleOptions{}), "rules[].", keys)
		configdoc.CheckPlugin(t, "firewall", keys, t.TempDir(), func(raw map[string]any) (any, error) {
			opts := Options{"rules": []any{map[string]any{"name": "r", "pattern": "x"}}} // one is required
			for k, v := range raw {
				opts[k] = v
			}
			p, err := newFirewall(opts, Env{})
			if err != nil {
				return nil, err
			}
			return p.(*firewall).mode, nil
		})
	})
	// Every plugin of this package has a table.
	for name := range Builtins() {
		configdoc.PluginRows(t, name)
	}
}
