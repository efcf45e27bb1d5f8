package ddloffload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
)

// WatchOptions are the `tableproxy ddl watch` flags.
type WatchOptions struct {
	Interval time.Duration // between polls
	Once     bool          // print one snapshot and return
	All      bool          // list ended jobs too, not only running ones
	TTY      bool          // redraw in place (the output is a terminal)
}

// Watch polls a proxy for its DDL jobs over c (a MySQL connection to the
// proxy) and prints each running job with a progress bar, its rate and
// ETA, until ctx ends (or once). It reads ADMIN SHOW DDL JOBS, or, for a
// user who is not an admin, tableproxy.ddl_jobs.
func Watch(ctx context.Context, w io.Writer, c *client.Conn, o WatchOptions) error {
	if o.Interval <= 0 {
		o.Interval = time.Second
	}
	for {
		jobs, err := pollJobs(c)
		if err != nil {
			return err
		}
		var b strings.Builder
		if o.TTY {
			b.WriteString("\x1b[H\x1b[2J") // home, clear: redraw in place
		}
		renderJobs(&b, jobs, o.All, time.Now())
		if _, err := io.WriteString(w, b.String()); err != nil {
			return err
		}
		if o.Once {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(o.Interval):
		}
	}
}

// pollJobs reads the jobs, newest first.
func pollJobs(c *client.Conn) ([]Job, error) {
	res, err := c.Execute("ADMIN SHOW DDL JOBS")
	if err == nil {
		return jobsFromAdmin(res), nil
	}
	var me *mysql.MyError
	if !errors.As(err, &me) || me.Code != mysql.ER_SPECIFIC_ACCESS_DENIED_ERROR {
		return nil, fmt.Errorf("ADMIN SHOW DDL JOBS: %w", err)
	}
	res, err2 := c.Execute("SELECT job_id, db_name, table_name, job_type, state, stage, row_count, rows_estimated, rate, eta_seconds, error FROM tableproxy.ddl_jobs")
	if err2 != nil {
		return nil, fmt.Errorf("ADMIN SHOW DDL JOBS: %w; SELECT FROM tableproxy.ddl_jobs: %w", err, err2)
	}
	jobs := make([]Job, res.RowNumber())
	for i := range jobs {
		j := &jobs[i]
		j.ID, _ = res.GetInt(i, 0)
		j.Schema, _ = res.GetString(i, 1)
		j.Table, _ = res.GetString(i, 2)
		j.Type, _ = res.GetString(i, 3)
		j.State, _ = res.GetString(i, 4)
		j.Stage, _ = res.GetString(i, 5)
		j.RowsDone, _ = res.GetInt(i, 6)
		j.RowsEstimate, _ = res.GetInt(i, 7)
		rate, _ := res.GetInt(i, 8)
		j.Rate = float64(rate)
		if eta, _ := res.GetInt(i, 9); eta >= 0 {
			j.ETA = time.Duration(eta) * time.Second
		}
		j.Error, _ = res.GetString(i, 10)
	}
	return jobs, nil
}

// jobsFromAdmin reads ADMIN SHOW DDL JOBS (see jobsColumns).
func jobsFromAdmin(res *mysql.Result) []Job {
	jobs := make([]Job, res.RowNumber())
	for i := range jobs {
		j := &jobs[i]
		j.ID, _ = res.GetIntByName(i, "JOB_ID")
		j.Schema, _ = res.GetStringByName(i, "DB_NAME")
		j.Table, _ = res.GetStringByName(i, "TABLE_NAME")
		j.Type, _ = res.GetStringByName(i, "JOB_TYPE")
		j.State, _ = res.GetStringByName(i, "STATE")
		j.Stage, _ = res.GetStringByName(i, "STAGE")
		j.RowsDone, _ = res.GetIntByName(i, "ROW_COUNT")
		j.RowsEstimate, _ = res.GetIntByName(i, "ROWS_ESTIMATED")
		rate, _ := res.GetIntByName(i, "RATE")
		j.Rate = float64(rate)
		if eta, _ := res.GetStringByName(i, "ETA"); eta != "" {
			j.ETA, _ = time.ParseDuration(eta)
		}
		j.Error, _ = res.GetStringByName(i, "ERROR")
	}
	return jobs
}

// renderJobs writes one line per job: running ones (paused and throttled
// included), and with all, the ended ones.
func renderJobs(b *strings.Builder, jobs []Job, all bool, now time.Time) {
	fmt.Fprintf(b, "tableproxy DDL jobs, %s\n", now.Format("15:04:05"))
	shown := 0
	for _, j := range jobs {
		running := j.State == StateRunning || j.State == StatePaused || j.State == StateThrottled
		if !running && !all {
			continue
		}
		shown++
		fmt.Fprintf(b, "#%-4d %s.%s  %s  %-9s %-9s %s %5.1f%%", j.ID, j.Schema, j.Table, j.Type, j.State, j.Stage, bar(j.Progress(), 30), j.Progress())
		if j.RowsEstimate > 0 || j.RowsDone > 0 {
			fmt.Fprintf(b, "  %d/%d rows", j.RowsDone, j.RowsEstimate)
		}
		if j.Rate > 0 {
			fmt.Fprintf(b, "  %d rows/s", int64(j.Rate))
		}
		if running && j.ETA > 0 {
			fmt.Fprintf(b, "  ETA %s", j.ETA.Round(time.Second))
		}
		if j.Error != "" {
			fmt.Fprintf(b, "  error: %s", j.Error)
		}
		b.WriteByte('\n')
	}
	if shown == 0 {
		b.WriteString("no DDL jobs running\n")
	}
}

// bar draws a progress bar of width cells for percent.
func bar(percent float64, width int) string {
	full := int(percent / 100 * float64(width))
	full = min(max(full, 0), width)
	return "[" + strings.Repeat("#", full) + strings.Repeat("-", width-full) + "]"
}
