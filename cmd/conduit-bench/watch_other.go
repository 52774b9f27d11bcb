//go:build !linux

package main

import "time"

// watchDir, where there is no inotify, wakes every millisecond.
func watchDir(string) (<-chan struct{}, func(), error) {
	changed := make(chan struct{}, 1)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				select {
				case changed <- struct{}{}:
				default:
				}
			case <-stop:
				return
			}
		}
	}()
	return changed, func() { close(stop); <-done }, nil
}
