package main

import (
	"os"
	"path/filepath"
	"syscall"
)

// watchDir returns a channel that receives when a file in the directory
// of path is created or written, and a function that stops the watch. The
// CDC comparison times each line by it: polling the file every
// millisecond would floor every latency at the poll's period.
func watchDir(path string) (<-chan struct{}, func(), error) {
	fd, err := syscall.InotifyInit1(syscall.IN_NONBLOCK | syscall.IN_CLOEXEC)
	if err != nil {
		return nil, nil, err
	}
	if _, err := syscall.InotifyAddWatch(fd, filepath.Dir(path), syscall.IN_CREATE|syscall.IN_MODIFY); err != nil {
		_ = syscall.Close(fd)
		return nil, nil, err
	}
	// Non-blocking, the file is read through Go's poller, so that Close
	// ends the Read below.
	f := os.NewFile(uintptr(fd), "inotify")
	changed := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 64<<10)
		for {
			if _, err := f.Read(buf); err != nil {
				return
			}
			select {
			case changed <- struct{}{}:
			default:
			}
		}
	}()
	return changed, func() { _ = f.Close(); <-done }, nil
}
