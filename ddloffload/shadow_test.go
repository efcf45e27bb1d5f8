package ddloffload

import "testing"

// The build's session settings follow what the backend has: MySQL 8.0.27
// and later get the job's workers and sort memory; MariaDB, nothing.
func TestBuildKnobs(t *testing.T) {
	s := Settings{Workers: 4, SortMemory: 64 << 20}
	all := map[string]bool{"innodb_ddl_threads": true, "innodb_ddl_buffer_size": true, "innodb_parallel_read_threads": true}
	if got, want := buildKnobs(all, s), "innodb_ddl_threads = 4, innodb_ddl_buffer_size = 67108864, innodb_parallel_read_threads = 4"; got != want {
		t.Errorf("MySQL 8: %q, want %q", got, want)
	}
	if got := buildKnobs(map[string]bool{}, s); got != "" {
		t.Errorf("MariaDB: %q, want nothing", got)
	}
	if got, want := buildKnobs(all, Settings{Workers: 100, SortMemory: 1}), "innodb_ddl_threads = 64, innodb_ddl_buffer_size = 65536, innodb_parallel_read_threads = 100"; got != want {
		t.Errorf("out of range: %q, want %q", got, want)
	}
}
