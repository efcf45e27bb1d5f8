package configs

import "strings"

// DefaultPlugins run when the configuration has no plugins section and no
// --plugins flag: the product's features (metrics are collected always and
// served when metrics_listen is set). A `plugins: []` section means none.
var DefaultPlugins = []string{"metrics", "cache", "ddloffload"}

// binlogReaders are the plugins that follow the backend's binary log and
// take a binlog_user option.
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

// DefaultBinlogUser gives every plugin that reads the binary log the first
// admin user as its binlog_user when it names none: a user who configured
// only --user and --admin-user still gets writes that bypass the proxy seen.
// It returns the user each such plugin reads the log as, by plugin name.
func (c *Config) DefaultBinlogUser() map[string]string {
	admin := c.FirstAdmin()
	users := map[string]string{}
	for i, p := range c.Plugins {
		if !binlogReaders[p.Name] {
			continue
		}
		user, _ := p.Options["binlog_user"].(string)
		if user == "" && admin != "" {
			if p.Options == nil {
				p.Options = map[string]any{}
			}
			p.Options["binlog_user"] = admin
			c.Plugins[i] = p
			user = admin
		}
		users[p.Name] = user
	}
	return users
}
