package ddloffload

import "testing"

func TestLikeMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, s string
		want       bool
	}{
		{"tableproxy_ddl%", "tableproxy_ddl_workers", true},
		{"tableproxy\\_ddl\\_w%", "tableproxy_ddl_workers", true},
		{"tableproxy\\_ddl\\_w%", "tableproxyxddl_workers", false},
		{"%quota", "tableproxy_ddl_disk_quota", true},
		{"tableproxy_ddl_worker", "tableproxy_ddl_workers", false},
		{"%", "", true},
	} {
		if got := likeMatch(tc.pattern, tc.s); got != tc.want {
			t.Errorf("likeMatch(%q, %q) = %v", tc.pattern, tc.s, got)
		}
	}
}

func TestVarNormalize(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    any
		want string // "" for an error
	}{
		{"workers", int64(8), "8"},
		{"workers", int64(0), ""},
		{"workers", "8", ""},
		{"sort_memory", "64M", "67108864"},
		{"sort_memory", int64(1024), ""}, // below 1 MB
		{"copy_method", "READ_AHEAD", "read_ahead"},
		{"strategy", "online", ""},
		{"temp_dir", "/tmp/x/../y", "/tmp/y"},
		{"temp_dir", "relative", ""},
		{"disk_quota", uint64(1 << 63), ""},
	} {
		d, ok := lookupVar(varPrefix + tc.name)
		if !ok {
			t.Fatalf("no variable %s", tc.name)
		}
		got, err := d.normalize(tc.v)
		if (err == nil) != (tc.want != "") || got != tc.want {
			t.Errorf("%s = %v: %q, %v", tc.name, tc.v, got, err)
		}
	}
}
