package instance

import (
	"time"

	"golang.org/x/sys/unix"
)

// leaseClock reads a clock that counts time the machine spent suspended
// (CLOCK_BOOTTIME), which Go's monotonic clock does not: an instance
// whose machine slept past its leases must find them expired on waking,
// not resume writing to destinations as if no time had passed.
func leaseClock() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return time.Duration(time.Now().UnixNano())
	}
	return time.Duration(ts.Nano())
}
