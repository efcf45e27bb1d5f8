package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strings"

	"tableproxy/cache"
	"tableproxy/configs"
	"tableproxy/ddloffload"
	"tableproxy/digest"
	"tableproxy/plugins"
)

// checkConfig is `tableproxy check-config [serve's flags]`: it reads the
// configuration exactly as serve would (the file, then the flags over it)
// and checks it without starting anything. Exit status: 0 valid, 1 the
// configuration is not (each problem named by its field, as serve names
// it), 2 the command line is wrong.
func checkConfig(args []string) error {
	cfg, _, _, _, err := serveConfig("check-config", args)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	return checkResult(cfg, err)
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
