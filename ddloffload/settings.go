package ddloffload

// Settings are a job's knobs, fixed when it starts (from the session's
// variables) and kept in its checkpoint.
type Settings struct {
	Workers   int `json:"workers,omitempty"`
	BatchSize int `json:"batch_size,omitempty"`
}

// withDefaults fills the knobs a job did not set from the plugin's options.
func (s Settings) withDefaults(o Options) Settings {
	if s.Workers <= 0 {
		s.Workers = o.Workers
	}
	if s.BatchSize <= 0 {
		s.BatchSize = o.ChunkRows
	}
	return s
}
