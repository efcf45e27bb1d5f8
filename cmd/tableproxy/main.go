// Command tableproxy is a MySQL-protocol proxy. It only wires: the
// behaviour lives in the proxy, plugins and configs packages.
package main

import (
	"fmt"
	"os"

	"tableproxy/cache"
	"tableproxy/cluster"
	"tableproxy/plugins"
)

// Plugins that live outside the plugins package register here; the
// built-in ones register themselves.
func init() {
	plugins.Register(cache.Name, func(o plugins.Options, env plugins.Env) (plugins.Plugin, error) {
		return cache.NewFactory(node.cache)(o, env)
	})
	plugins.Register(cluster.AdminName, func(plugins.Options, plugins.Env) (plugins.Plugin, error) {
		return cluster.NewAdmin(node.node), nil
	})
}

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "version", "--version":
		fmt.Println("tableproxy", version)
	case "help", "-h", "--help":
		usage()
	default:
		fmt.Fprintf(os.Stderr, "tableproxy: unknown command %q\n\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "tableproxy:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprint(os.Stderr, `usage: tableproxy <command> [flags]

commands:
  serve     run the proxy (tableproxy serve --help for flags)
  version   print the version
`)
}
