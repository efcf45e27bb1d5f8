package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-mysql-org/go-mysql/client"

	"tableproxy/ddloffload"
)

// ddl runs the ddl subcommands.
func ddl(args []string) error {
	if len(args) == 0 || args[0] != "watch" {
		return errors.New("usage: tableproxy ddl watch [flags] (tableproxy ddl watch --help for flags)")
	}
	fs := flag.NewFlagSet("ddl watch", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:6033", "the proxy's client address")
	user := fs.String("user", "", "user to connect as (an admin sees ADMIN SHOW DDL JOBS; others tableproxy.ddl_jobs)")
	password := fs.String("password", "", "password (default: $TABLEPROXY_PASSWORD)")
	interval := fs.Duration("interval", time.Second, "time between polls")
	once := fs.Bool("once", false, "print the jobs once and exit")
	all := fs.Bool("all", false, "list ended jobs too")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if *user == "" {
		return errors.New("ddl watch: --user is required")
	}
	pw := *password
	if pw == "" {
		pw = os.Getenv("TABLEPROXY_PASSWORD")
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	c, err := client.ConnectWithContext(ctx, *addr, *user, pw, "", 10*time.Second)
	if err != nil {
		return fmt.Errorf("ddl watch: connect to %s: %w", *addr, err)
	}
	defer c.Close()
	st, _ := os.Stdout.Stat()
	tty := st != nil && st.Mode()&os.ModeCharDevice != 0
	return ddloffload.Watch(ctx, os.Stdout, c, ddloffload.WatchOptions{Interval: *interval, Once: *once, All: *all, TTY: tty && !*once})
}
