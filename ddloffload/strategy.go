package ddloffload

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// StrategyAuto (the default) picks a job's strategy when it starts, so
// that every ADD INDEX the backend would accept succeeds:
//
//   - native (the backend's own online build, guarded: see native.go) where
//     the shadow-table swap cannot carry the table but the backend builds
//     online: foreign keys in either direction, triggers, no key to walk
//     in order, a binary log that does not show every row, a name too long
//     for the job's tables;
//   - native where the table holds less than native_below of data (16MB by
//     default): there the backend's build takes well under a second
//     (measured: 0.2 s for 11 MB of rows on a 2-core host), less than a
//     copy's set-up, and an empty table a migration has just created is
//     the common case, unless replicas are watched (tableproxy_ddl_max_replica_lag)
//     and the build, estimated from the table's size and the last build
//     rate measured here, would last longer than that lag allows: a
//     replica applies a native ALTER only after the primary, and stalls
//     for as long;
//   - backfill otherwise, and for a postponed cut-over.
//
// An explicit strategy (the session's tableproxy_ddl_strategy, or the
// plugin's strategy option) is followed as it is. The choice and its
// reason are kept in the job (tableproxy.ddl_jobs, ADMIN SHOW DDL JOBS)
// and in its checkpoint: a resumed job runs the strategy it began with.
const StrategyAuto = "auto"

// chooseStrategy resolves the auto strategy into backfill or native,
// and records the choice and why. It looks at the table on a connection
// of its own; a table that cannot be read is left to the preflight of
// the backfill strategy, which gives the client its error.
func (r *runner) chooseStrategy(ctx context.Context) error {
	strategy, why, err := r.autoStrategy(ctx)
	if err != nil {
		return err
	}
	r.set.Strategy, r.cp.Settings.Strategy = strategy, strategy
	r.log.Info("ddl: strategy chosen", "strategy", strategy, "why", why)
	return r.p.jobs.update(r.rec, func(j *Job) {
		j.Strategy, j.StrategyReason = strategy, why
		j.Checkpoint.Settings.Strategy = strategy
	})
}

func (r *runner) autoStrategy(ctx context.Context) (strategy, why string, err error) {
	if r.set.PostponeCutOver {
		return StrategyBackfill, "auto: the cut-over is postponed (tableproxy_ddl_postpone_cutover): only the backfiller waits, ready, for ADMIN COMPLETE DDL JOBS", nil
	}
	c, err := r.connect(ctx)
	if err != nil {
		return "", "", err
	}
	defer c.Close()
	t, err := loadTable(c, r.req.Schema, r.req.Table)
	if err != nil {
		return StrategyBackfill, "auto: the table could not be read", nil
	}
	// The backfill preflight's own checks, on this connection and a copy
	// of the table that preflight loads again.
	check := &runner{p: r.p, rec: r.rec, req: r.req, cp: r.cp, conn: c, t: t}
	for _, f := range []func() error{check.checkKey, check.checkAttached, check.checkBinlog, check.checkNameLength} {
		err := f()
		var refusal *swapRefusal
		if errors.As(err, &refusal) {
			return StrategyNative, "auto: " + refusal.why, nil
		}
		if err != nil {
			return "", "", err
		}
	}
	below := r.p.opts.nativeBelow
	if lagLimit := r.p.vars.globalInt(varPrefix + "max_replica_lag"); t.DataLength < below && r.p.watchesReplicas() {
		// A replica applies a native ALTER only once the primary has
		// finished it, and holds everything after it meanwhile: its lag
		// grows by the ALTER's whole duration.
		rate, measured := r.p.buildRate.Load(), "measured"
		if rate <= 0 {
			rate, measured = defaultBuildRate, "assumed"
		}
		if est := time.Duration(float64(t.DataLength) / float64(rate) * float64(time.Second)); est > time.Duration(lagLimit)*time.Second {
			return StrategyBackfill, fmt.Sprintf("auto: %s of data would take about %v to build natively (at the %s %s/s), and the replicas would lag as long, past tableproxy_ddl_max_replica_lag %d",
				byteSize(t.DataLength), est.Round(100*time.Millisecond), measured, byteSize(rate), lagLimit), nil
		}
	}
	if t.DataLength < below {
		return StrategyNative, fmt.Sprintf("auto: %s of data, under native_below (%s): the backend's own build is brief", byteSize(t.DataLength), byteSize(below)), nil
	}
	return StrategyBackfill, fmt.Sprintf("auto: %s of data, native_below is %s", byteSize(t.DataLength), byteSize(below)), nil
}

// watchesReplicas reports whether jobs hold their copy for replica lag:
// replicas are configured and tableproxy_ddl_max_replica_lag is set.
func (p *Plugin) watchesReplicas() bool {
	return len(p.opts.Replicas) > 0 && p.vars.globalInt(varPrefix+"max_replica_lag") > 0
}

// defaultBuildRate is the build rate the auto strategy assumes before it
// has measured one: low, so that a replica is spared rather than risked.
const defaultBuildRate = 8 << 20

// checkNameLength refuses a table whose name leaves no room for the job's
// shadow and kept tables.
func (r *runner) checkNameLength() error {
	r.rec.mu.Lock()
	j := r.rec.job
	r.rec.mu.Unlock()
	if _, _, ok := shadowNames(r.t.Table, j.ID, j.Start); !ok {
		return errNameTooLong(r.t.Table)
	}
	return nil
}

func errNameTooLong(table string) error {
	return cannotSwap(fmt.Sprintf("table name %s is too long for the names of the job's shadow and kept tables (64 characters at most)", table), errUnsupported)
}

// strategyReason says why a job runs the strategy it was given.
func strategyReason(s Settings) string {
	return "set: tableproxy_ddl_strategy = " + s.Strategy
}

// byteSize renders a size as the config writes one (16MB, 1.5GB).
func byteSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%dB", n)
	}
	v, suffix := float64(n), ""
	for _, s := range []string{"KB", "MB", "GB", "TB"} {
		v /= unit
		suffix = s
		if v < unit {
			break
		}
	}
	return strings.TrimSuffix(strings.TrimSuffix(fmt.Sprintf("%.1f", v), "0"), ".") + suffix
}
