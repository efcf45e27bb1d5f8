//go:build !unix

package main

// lockDataDir does nothing where flock is not available.
func lockDataDir(string) error { return nil }
