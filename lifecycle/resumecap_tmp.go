package lifecycle

import "time"

// CapResumeWait (placeholder until the policy change lands).
func CapResumeWait(p Policy, failCount int, savedNext, now time.Time) time.Time {
	limit := now.Add(p.MaxDelay)
	if d := Delay(p, max(failCount, 1), 1); d > p.MaxDelay {
		limit = now.Add(d)
	}
	if savedNext.After(limit) {
		return limit
	}
	if savedNext.Before(now) {
		return now
	}
	return savedNext
}
