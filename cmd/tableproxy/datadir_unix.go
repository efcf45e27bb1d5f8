//go:build unix

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// lockDataDir takes dir for this process: one proxy per data directory
// (two would share a Raft log and a job store). The lock is the kernel's
// (flock on dir/LOCK), so a proxy that died holds none; the file names
// the holder's pid. It is held until the process exits.
func lockDataDir(dir string) error {
	path := filepath.Join(dir, "LOCK")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("data_dir: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		pid, _ := os.ReadFile(path)
		f.Close()
		return fmt.Errorf("data_dir %s is in use by another tableproxy (pid %s, per %s): give each proxy its own --data-dir",
			dir, strings.TrimSpace(string(pid)), path)
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	dataDirLock = f // (kept open: closing it would release the lock)
	return nil
}

var dataDirLock *os.File
