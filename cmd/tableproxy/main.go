// Command tableproxy is a MySQL-protocol proxy. It only wires: the
// behaviour lives in the proxy, plugins and configs packages.
package main

import (
	"fmt"
	"os"

	"tableproxy/cache"
	"tableproxy/cluster"
	"tableproxy/ddloffload"
	"tableproxy/plugins"
	"tableproxy/vschema"
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
	plugins.Register(ddloffload.Name, ddloffload.Factory)
}

// wirePlugins connects plugins that know of each other (the DDL jobs
// refuse cached tables) and returns the virtual schema, with the tables
// of the plugins that are on.
func wirePlugins(chain *plugins.Chain) *vschema.Schema {
	vs := vschema.New()
	if node.node != nil {
		vs.Add("cluster_members", cluster.NewMembersTable(node.node))
	}
	var cp *cache.Plugin
	var dp *ddloffload.Plugin
	for _, p := range chain.Plugins() {
		switch p := p.(type) {
		case *cache.Plugin:
			cp = p
			vs.Add("cached_tables", p.CachedTables())
			vs.AddSession("last_statement", p.LastStatement())
		case *ddloffload.Plugin:
			dp = p
			vs.Add("ddl_jobs", p.JobsTable())
		}
	}
	if cp != nil && dp != nil {
		dp.SetCachedFunc(func(schema, table string) bool {
			for _, st := range cp.Tables() {
				if st.Schema == schema && st.Table == table {
					return true
				}
			}
			return false
		})
	}
	return vs
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
	case "ddl":
		err = ddl(os.Args[2:])
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
  ddl watch show the running DDL jobs with progress, rate and ETA (tableproxy ddl watch --help)
  version   print the version
`)
}
