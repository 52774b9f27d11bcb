//go:build !linux

package instance

import "time"

// processStart is the base of leaseClock's readings.
var processStart = time.Now()

// leaseClock reads the monotonic clock where no clock that counts a
// suspended machine's sleep is at hand.
func leaseClock() time.Duration { return time.Since(processStart) }
