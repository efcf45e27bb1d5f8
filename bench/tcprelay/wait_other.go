//go:build !linux

package main

import "time"

// waiter falls back to Go's timers outside Linux; they may round short
// sleeps up.
type waiter struct{}

func newWaiter() (*waiter, error) { return &waiter{}, nil }

func (w *waiter) wait(d time.Duration) { time.Sleep(d) }

func (w *waiter) close() {}
