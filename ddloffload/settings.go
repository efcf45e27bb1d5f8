package ddloffload

import "time"

// Settings are a job's knobs, fixed when it starts (from its session's
// variables, see vars.go) and kept in its checkpoint, so that a resumed
// job runs as it began.
type Settings struct {
	Workers         int    `json:"workers,omitempty"`
	BatchSize       int    `json:"batch_size,omitempty"`
	CopyMethod      string `json:"copy_method,omitempty"`
	SortMemory      int64  `json:"sort_memory,omitempty"`
	Strategy        string `json:"strategy,omitempty"`
	LockWaitTimeout int    `json:"lock_wait_timeout,omitempty"` // seconds
	NativeRetries   int    `json:"native_retries,omitempty"`
	TempDir         string `json:"temp_dir,omitempty"`
	DiskQuota       int64  `json:"disk_quota,omitempty"`
	// PostponeCutOver: the job waits, ready to cut over and keeping up
	// with the binary log, until ADMIN COMPLETE DDL JOBS says go (see
	// complete.go).
	PostponeCutOver bool `json:"postpone_cutover,omitempty"`
}

// withDefaults fills the knobs a job did not set from the plugin's options.
func (s Settings) withDefaults(o Options) Settings {
	orDefault(&s.Workers, o.Workers)
	orDefault(&s.BatchSize, o.ChunkRows)
	orDefault(&s.CopyMethod, o.CopyMethod)
	orDefault(&s.SortMemory, o.sortMemory)
	orDefault(&s.Strategy, o.Strategy)
	orDefault(&s.LockWaitTimeout, max(1, int(time.Duration(o.LockWaitTimeout).Seconds())))
	orDefault(&s.NativeRetries, o.NativeRetries)
	orDefault(&s.TempDir, o.TempDir)
	orDefault(&s.DiskQuota, o.diskQuota)
	return s
}

func orDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}
