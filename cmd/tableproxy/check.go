package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"tableproxy/binlog"
	"tableproxy/cache"
	"tableproxy/configs"
	"tableproxy/ddloffload"
	"tableproxy/digest"
	"tableproxy/plugins"
	"tableproxy/proxy"
)

// checkConfig is `tableproxy check-config [serve's flags]`: it reads the
// configuration exactly as serve would (the file, then the flags over it)
// and checks it without starting anything. Exit status: 0 valid, 1 the
// configuration is not (each problem named by its field, as serve names
// it), 2 the command line is wrong.
//
// With --online it also asks the backend what the configuration needs of
// it: it logs in as every configured user (the backend must have each
// account with the same password) and checks the binary log's settings
// and the binlog user's rights, as the startup report does, printing each
// problem with the change that fixes it.
func checkConfig(args []string) error {
	online := false
	rest := args[:0:0]
	for _, a := range args {
		if a == "--online" || a == "-online" {
			online = true
			continue
		}
		rest = append(rest, a)
	}
	cfg, _, _, _, err := serveConfig("check-config", rest)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err := checkResult(cfg, err); err != nil || !online {
		return err
	}
	return checkOnline(cfg)
}

// checkOnline is check-config --online's part on the backend.
func checkOnline(cfg configs.Config) error {
	pcfg, _, err := proxyConfig(cfg, slog.Default())
	if err != nil {
		return err
	}
	connector := proxy.NewConnector(pcfg)
	ctx, cancel := context.WithTimeout(context.Background(), featureCheckTimeout)
	defer cancel()
	problems := 0
	for _, u := range cfg.Users {
		c, err := connector.Connect(ctx, u.Name, "")
		if err != nil {
			problems++
			fmt.Printf("user %s: the backend refuses it: %v\n  change: the backend needs the account %s with the password the proxy has for it\n", u.Name, err, u.Name)
			continue
		}
		c.Close()
		fmt.Printf("user %s: logs in\n", u.Name)
	}
	needsBinlog := false
	for _, p := range cfg.Plugins {
		needsBinlog = needsBinlog || p.Name == cache.Name || p.Name == ddloffload.Name
	}
	if needsBinlog {
		log := slog.New(slog.NewTextHandler(io.Discard, nil))
		follower := binlog.New(connector, cfg.BinlogUser, log)
		a := checkBinlogAccess(ctx, connector, follower, cfg.BinlogUser)
		follower.Close()
		switch {
		case a.unchecked != "":
			problems++
			fmt.Printf("binary log (as %s): not checked: %s\n", cfg.BinlogUser, a.unchecked)
		case a.problem != "":
			problems++
			fmt.Printf("binary log (as %s): %s\n  change: %s\n", cfg.BinlogUser, a.problem, a.change)
		default:
			fmt.Printf("binary log (as %s): followed (ROW, full row images)\n", cfg.BinlogUser)
		}
	}
	if problems > 0 {
		return fmt.Errorf("the backend does not give the configuration what it needs: %d problem(s) above", problems)
	}
	fmt.Println("tableproxy: the backend gives the configuration what it needs")
	return nil
}

// checkResult ends a check of cfg, which reading it answered with err:
// past what the reading checked, what serve refuses before it listens
// (TLS files that do not load, plugins that do not exist, plugin options
// their plugins refuse, named as serve names them).
func checkResult(cfg configs.Config, err error) error {
	if err != nil {
		return err
	}
	if _, _, err := proxyConfig(cfg, slog.Default()); err != nil {
		return err
	}
	factories := chainFactories(nil, "", &builtPlugins{})
	for i, p := range cfg.Plugins {
		if _, ok := factories[p.Name]; !ok {
			return fmt.Errorf("plugins[%d]: unknown plugin %q (known: %s)", i, p.Name, strings.Join(factories.Names(), ", "))
		}
		if err := checkPluginOptions(p.Name, p.Options); err != nil {
			return fmt.Errorf("plugins[%d] (%s): %w", i, p.Name, err)
		}
	}
	fmt.Println("tableproxy: the configuration is valid")
	return nil
}

// optionChecks are the checks of the options of the plugins this command
// adds to the built-in ones.
var optionChecks = map[string]func(plugins.Options) error{
	cache.Name:      cache.CheckOptions,
	ddloffload.Name: ddloffload.CheckOptions,
	digest.Name:     digest.CheckOptions,
}

// checkPluginOptions checks a plugin's options as its factory does.
func checkPluginOptions(name string, opts plugins.Options) error {
	if check, ok := optionChecks[name]; ok {
		return check(opts)
	}
	_, err := plugins.CheckBuiltin(name, opts)
	return err
}
