package configs

import "strings"

// DefaultPlugins run when the configuration has no plugins section and no
// --plugins flag: the product's features (metrics are collected always and
// served when metrics_listen is set). A `plugins: []` section means none.
var DefaultPlugins = []string{"metrics", "cache", "ddloffload", "digest"}

// binlogReaders are the plugins that follow the backend's binary log and
// took a binlog_user option of their own before the proxy had one.
var binlogReaders = map[string]bool{"cache": true, "ddloffload": true}

// SelectPlugins sets the plugin list to names, in that order, keeping the
// options a plugins section gave any of them. It is how the --plugins flag
// and the defaults apply; an empty names list turns every plugin off.
func (c *Config) SelectPlugins(names []string) {
	options := map[string]map[string]any{}
	for _, p := range c.Plugins {
		options[p.Name] = p.Options
	}
	list := make([]Plugin, 0, len(names))
	for _, n := range names {
		list = append(list, Plugin{Name: n, Options: options[n]})
	}
	c.Plugins = list
}

// ParsePluginList reads the --plugins flag: names separated by commas;
// "" and "none" mean no plugins.
func ParsePluginList(s string) []string {
	names := []string{}
	for _, n := range strings.Split(s, ",") {
		if n = strings.TrimSpace(n); n != "" && n != "none" {
			names = append(names, n)
		}
	}
	return names
}

// FirstAdmin is the first admin user, or "" when there is none.
func (c *Config) FirstAdmin() string {
	for _, u := range c.Users {
		if u.Admin {
			return u.Name
		}
	}
	return ""
}

// ResolveBinlogUser settles binlog_user, the one user the proxy reads the
// binary log as, when neither the file nor --binlog-user names it: the
// binlog_user of the first plugin that names one (configurations from
// before the top-level option named it per plugin), or else the first
// admin, so that a proxy configured with only --user and --admin-user
// still sees writes that bypass it. It returns the plugins whose option
// names one: it is deprecated, and a binlog_user that differs from the
// one the proxy reads as is not used.
func (c *Config) ResolveBinlogUser() (deprecated []string) {
	for _, p := range c.Plugins {
		if !binlogReaders[p.Name] {
			continue
		}
		if user, _ := p.Options["binlog_user"].(string); user != "" {
			deprecated = append(deprecated, p.Name)
			if c.BinlogUser == "" {
				c.BinlogUser = user
			}
		}
	}
	if c.BinlogUser == "" {
		c.BinlogUser = c.FirstAdmin()
	}
	return deprecated
}
