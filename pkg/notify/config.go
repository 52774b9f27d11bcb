package notify

import (
	"github.com/conduitry/conduit/auditlog"
	"github.com/conduitry/conduit/pkg/config"
	"github.com/conduitry/conduit/pkg/store"
)

// FromConfig builds the Notifier of cfg's notifications.* keys, reading
// each target's secrets with lookupEnv (os.LookupEnv); opts gives the
// rest. It returns nil, and no error, when no target is configured: every
// method of a nil Notifier does nothing. An unset variable or a URL that
// is refused is an error naming the file, line and target.
func FromConfig(cfg config.Config, lookupEnv func(string) (string, bool), opts Options) (*Notifier, error) {
	nc := cfg.Notifications
	if len(nc.Targets) == 0 {
		return nil, nil
	}
	opts.Targets = nil
	for _, t := range nc.Targets {
		rt, err := t.Resolve(lookupEnv)
		if err != nil {
			return nil, err
		}
		opts.Targets = append(opts.Targets, rt)
	}
	opts.GroupWindow, opts.MaxListed = nc.GroupWindow, nc.MaxListed
	opts.RecoveringAfter, opts.RetryMaxDelay = nc.RecoveringAfter, nc.RetryMaxDelay
	return New(opts), nil
}

// Hook is the audit log's auditlog.Options.With: nil for a nil Notifier,
// so that an audit log without notifications calls nothing.
func (n *Notifier) Hook() func(auditlog.Event) []store.Op {
	if n == nil {
		return nil
	}
	return n.Ops
}
