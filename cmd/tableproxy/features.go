package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"tableproxy/binlog"
	"tableproxy/configs"
	"tableproxy/plugins"
)

// The startup report: one log line per feature, saying whether it is on and,
// where the backend keeps it from working, what is off and what to change.
// It asks the backend what the features need (the binary log's settings,
// and whether the binlog user can find the log's end and stream it) by
// trying each, not by reading grants: roles, MySQL's and MariaDB's different
// privilege names and SUPER all come out the same way.

// featureCheckTimeout bounds the whole check; a backend that does not answer
// in time is reported as not checked (each feature checks again when used).
const featureCheckTimeout = 10 * time.Second

// feature is one of the product's capabilities and the plugin providing it.
type feature struct {
	title, plugin string
	needsBinlog   bool
	// without says what the feature does when the binary log cannot be read.
	without string
}

var features = []feature{
	{title: "cached tables", plugin: "cache", needsBinlog: true,
		without: "ALTER TABLE ... CACHE is refused (the cache option accept_stale_risk caches anyway)"},
	{title: "online ADD INDEX", plugin: "ddloffload", needsBinlog: true,
		without: "ADD INDEX jobs that copy the table are refused"},
	{title: "metrics", plugin: "metrics"},
	{title: "query digests and cache advisor", plugin: "digest"},
}

// reportFeatures logs the startup report. The plugins that need the binary
// log read it through follower, as cfg.BinlogUser.
func reportFeatures(log *slog.Logger, cfg configs.Config, backend plugins.Backend, follower *binlog.Follower) {
	enabled := map[string]bool{}
	for _, p := range cfg.Plugins {
		enabled[p.Name] = true
	}
	ctx, cancel := context.WithTimeout(context.Background(), featureCheckTimeout)
	defer cancel()
	user := cfg.BinlogUser
	var access *binlogAccess // (one check for every feature)
	for _, f := range features {
		line := "feature " + f.title
		if !enabled[f.plugin] {
			log.Info(line+": off", "change", fmt.Sprintf("add %q to the plugins section or to --plugins", f.plugin))
			continue
		}
		if f.plugin == "metrics" {
			if cfg.MetricsListen == "" {
				log.Info(line+": on, not served", "change", "set --metrics-listen (metrics_listen) to serve /metrics")
			} else {
				log.Info(line+": on", "listen", cfg.MetricsListen)
			}
			continue
		}
		if !f.needsBinlog {
			log.Info(line + ": on")
			continue
		}
		if access == nil {
			a := checkBinlogAccess(ctx, backend, follower, user)
			access = &a
		}
		a := *access
		switch {
		case a.unchecked != "":
			log.Warn(line+": on, backend not checked", "binlog_user", user, "why", a.unchecked)
		case a.problem != "":
			log.Warn(line+": limited: "+f.without, "binlog_user", user, "why", a.problem, "change", a.change)
		default:
			log.Info(line+": on", "binlog_user", user)
		}
	}
}

// binlogAccess is what checkBinlogAccess found: a problem and the change
// that fixes it, or why nothing could be checked, or neither (all is well).
type binlogAccess struct {
	problem, change string
	unchecked       string
}

// checkBinlogAccess checks that user can follow the backend's binary log as
// the plugins do: ROW format with full images, its end position readable,
// and the follower's replication stream running.
func checkBinlogAccess(ctx context.Context, backend plugins.Backend, follower *binlog.Follower, user string) binlogAccess {
	if user == "" {
		return binlogAccess{problem: "no user to read the binary log as",
			change: "add an --admin-user (the binary log is read as the first admin) or set binlog_user (--binlog-user)"}
	}
	conn, err := backend.Connect(ctx, user, "")
	if err != nil {
		return binlogAccess{unchecked: "cannot log in to the backend as " + user + ": " + err.Error()}
	}
	defer conn.Close()
	if a, ok := checkBinlogSettings(conn.Execute); !ok {
		return a
	}
	if _, err := binlog.End(conn); err != nil {
		if isAccessDenied(err) {
			return binlogAccess{problem: user + " cannot read where the binary log ends: " + err.Error(),
				change: "GRANT BINLOG MONITOR (MariaDB) or REPLICATION CLIENT (MySQL) ON *.* TO " + user}
		}
		return binlogAccess{unchecked: err.Error()}
	}
	if err := followBinlog(ctx, follower); err != nil {
		if isAccessDenied(err) {
			return binlogAccess{problem: user + " cannot stream the binary log: " + err.Error(),
				change: "GRANT REPLICATION SLAVE ON *.* TO " + user}
		}
		return binlogAccess{unchecked: "opening a binary log stream: " + err.Error()}
	}
	return binlogAccess{}
}

type execFunc func(string, ...any) (*mysql.Result, error)

// checkBinlogSettings requires log_bin, binlog_format=ROW and
// binlog_row_image=FULL; ok is false with the problem otherwise.
func checkBinlogSettings(exec execFunc) (binlogAccess, bool) {
	r, err := exec("SELECT @@log_bin, @@binlog_format, @@binlog_row_image")
	if err != nil {
		return binlogAccess{unchecked: "reading the binary log settings: " + err.Error()}, false
	}
	defer r.Close()
	logBin, _ := r.GetInt(0, 0)
	format, _ := r.GetString(0, 1)
	image, _ := r.GetString(0, 2)
	switch {
	case logBin != 1:
		return binlogAccess{problem: "the backend's binary log is off (log_bin=OFF)",
			change: "start the backend with log_bin, binlog_format=ROW and binlog_row_image=FULL"}, false
	case format != "ROW":
		return binlogAccess{problem: "the backend's binary log is not in ROW format (binlog_format=" + format + ")",
			change: "SET GLOBAL binlog_format = ROW on the backend (and in its config file)"}, false
	case image != "FULL":
		return binlogAccess{problem: "the backend's binary log lacks full row images (binlog_row_image=" + image + ")",
			change: "SET GLOBAL binlog_row_image = FULL on the backend (and in its config file)"}, false
	}
	return binlogAccess{}, true
}

// followBinlog subscribes to the proxy's follower, which opens its stream
// (unless a plugin already follows the log), and leaves once the stream
// has reached the log's end, or has broken.
func followBinlog(ctx context.Context, follower *binlog.Follower) error {
	result := make(chan error, 1)
	tell := func(err error) {
		select {
		case result <- err:
		default:
		}
	}
	sub := follower.Subscribe(binlog.Subscriber{
		Started: func(mysql.Position) { tell(nil) },
		Event:   func(*replication.BinlogEvent, mysql.Position) error { return nil },
		Broken:  tell,
	})
	defer sub.Close()
	select {
	case err := <-result:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// isAccessDenied reports whether the backend refused for want of a privilege.
func isAccessDenied(err error) bool {
	var me *mysql.MyError
	if errors.As(err, &me) {
		return me.Code == mysql.ER_SPECIFIC_ACCESS_DENIED_ERROR || me.Code == mysql.ER_ACCESS_DENIED_ERROR ||
			me.Code == mysql.ER_DBACCESS_DENIED_ERROR || me.Code == mysql.ER_TABLEACCESS_DENIED_ERROR
	}
	return false
}
