// Package plugins owns the plugin API of the proxy and its built-in plugins.
//
// Every client request that carries a statement (COM_QUERY, COM_STMT_PREPARE,
// COM_STMT_EXECUTE) is shown to the chain as a *Statement before it is sent on.
// A plugin that filters may let it pass, answer it itself, or refuse it with a
// MySQL error; a plugin that observes is told the outcome afterwards. The
// proxy's session loop is the only caller, so plugins never see the wire.
//
// What can go wrong: a plugin runs on the per-query hot path, so it must not
// block, must not allocate per statement without need, and must be safe for
// concurrent use by many sessions at once.
//
// It imports binlog (the follower handed to plugins in Env) and nothing
// else of the proxy's: the proxy drives the chain, and plugins built in
// other packages (cache, ddloffload, cluster's admin SQL) import this one.
package plugins
