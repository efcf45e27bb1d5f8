package main

import (
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// waiter sleeps with microsecond precision: a non-blocking timerfd read
// through Go's network poller. Go's timers are not used because on Linux the
// runtime rounds a sub-millisecond sleep up to about 1ms when it has nothing
// else to do, and a blocking nanosleep would hold one of the few Ps.
type waiter struct {
	fd   int
	file *os.File
	buf  [8]byte
}

func newWaiter() (*waiter, error) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	// A non-blocking descriptor is registered with the poller, so Read parks
	// the goroutine instead of blocking a thread.
	return &waiter{fd: fd, file: os.NewFile(uintptr(fd), "timerfd")}, nil
}

func (w *waiter) wait(d time.Duration) {
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(int64(d))}
	if err := unix.TimerfdSettime(w.fd, 0, &spec, nil); err != nil {
		time.Sleep(d)
		return
	}
	if _, err := w.file.Read(w.buf[:]); err != nil {
		time.Sleep(d)
	}
}

func (w *waiter) close() { w.file.Close() }
