package notify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/conduitry/conduit/pkg/config"
)

// DefaultTimeout bounds one POST to a target.
const DefaultTimeout = 10 * time.Second

// NewClient returns the HTTP client notifications are sent with: it
// follows no redirect (a webhook that moves must be reconfigured, and a
// redirect must not carry a message, or a secret in its URL, elsewhere).
func NewClient(timeout time.Duration) *http.Client {
	return &http.Client{
		Timeout:       timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// deliveryError is a failed POST: the status (0 when none came back) and
// how long the target asked to be left alone (429 and 503's Retry-After).
type deliveryError struct {
	status     int
	retryAfter time.Duration
	err        error
}

func (e *deliveryError) Error() string { return e.err.Error() }

// maxErrorBody bounds what a target's error answer adds to the message.
const maxErrorBody = 200

// post sends body to t. The error never holds the URL: it is a secret.
func post(ctx context.Context, client *http.Client, t config.ResolvedTarget, body []byte, now time.Time) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.URL.Reveal(), bytes.NewReader(body))
	if err != nil {
		return &deliveryError{err: errors.New("the target's URL cannot be used")}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "conduit-notify")
	resp, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
			if ue.Timeout() {
				err = fmt.Errorf("no answer within the timeout: %w", err)
			}
		}
		return &deliveryError{err: fmt.Errorf("POST failed: %s", strings.ReplaceAll(err.Error(), t.URL.Reveal(), config.Masked))}
	}
	defer resp.Body.Close()
	text, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	de := &deliveryError{status: resp.StatusCode}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		de.retryAfter = retryAfter(resp.Header.Get("Retry-After"), now)
	}
	msg := fmt.Sprintf("HTTP %d", resp.StatusCode)
	if s := strings.TrimSpace(string(text)); s != "" {
		msg += ": " + strings.ReplaceAll(s, t.URL.Reveal(), config.Masked)
	}
	de.err = errors.New(msg)
	return de
}

// retryAfter reads a Retry-After header: seconds or an HTTP date; 0 when
// absent or unreadable.
func retryAfter(h string, now time.Time) time.Duration {
	if h == "" {
		return 0
	}
	if s, err := strconv.Atoi(strings.TrimSpace(h)); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	if at, err := http.ParseTime(h); err == nil && at.After(now) {
		return at.Sub(now)
	}
	return 0
}

// Backoff bounds.
const (
	retryMinDelay = time.Second
	// maxRetryAfter caps what a target may ask for.
	maxRetryAfter = time.Hour
)

// retryDelay is the wait after the n-th failure in a row (n >= 1):
// retryMinDelay * 2^(n-1), capped at maxDelay; a Retry-After the target
// sent wins, within maxRetryAfter.
func retryDelay(n int, maxDelay, asked time.Duration) time.Duration {
	if asked > 0 {
		return min(asked, maxRetryAfter)
	}
	if n > 32 {
		return maxDelay
	}
	return min(retryMinDelay<<(n-1), maxDelay)
}
