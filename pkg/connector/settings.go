package connector

import (
	"strings"

	"github.com/conduitry/conduit/pkg/plugin"
)

// SettingError says which setting of a connector is wrong; callers above
// add the pipeline, the connector and the file.
type SettingError = plugin.SettingError

// connectorRole says which sdk.* settings apply.
type connectorRole int

const (
	roleSource connectorRole = iota + 1
	roleDestination
)

// sdkRecordFormat is the only record format the destinations write.
const sdkRecordFormat = "opencdc/json"

// sdkSettings handles Conduit's SDK middleware settings (sdk.*), so that a pipeline
// file written for Conduit runs unchanged. The engine does batching itself,
// and this runtime has no schema registry and no per-connector rate limiter,
// so almost all of them are accepted and ignored; the ones with a
// well-known type are still checked, so a typo in a value is not silently
// swallowed. See the package documentation for the list.
func sdkSettings(s *plugin.Settings, role connectorRole) {
	keys := s.Prefixed("sdk.", "sdk.*")
	// "sdk.*" documents them all; the typed readers below only check values.
	s.Undocumented(func() {
		for _, k := range keys {
			checkSDKSetting(s, role, k)
		}
	})
}

func checkSDKSetting(s *plugin.Settings, role connectorRole, k string) {
	v := s.Value(k)
	if strings.TrimSpace(v) == "" {
		return
	}
	switch {
	case k == "sdk.batch.size",
		role == roleDestination && k == "sdk.rate.burst":
		s.Int(k, 0, 0)
	case k == "sdk.batch.delay":
		s.Duration(k, 0)
	case role == roleDestination && k == "sdk.rate.perSecond":
		s.Float(k, 0)
	case k == "sdk.schema.extract.key.enabled",
		k == "sdk.schema.extract.payload.enabled",
		k == "sdk.schema.context.enabled":
		s.Bool(k, false)
	case role == roleDestination && k == "sdk.record.format":
		if f := strings.TrimSpace(v); f != sdkRecordFormat {
			s.Failf(k, "%q is not supported (the only record format is %s)", v, sdkRecordFormat)
		}
	}
}
