// Package configs owns tableproxy's configuration: the schema of the YAML
// file, its defaults, and validation whose errors name the bad field.
// Command-line flags override the file; the command applies them before
// calling Validate.
//
// It imports no other package of the proxy: every other one may import
// it.
package configs
