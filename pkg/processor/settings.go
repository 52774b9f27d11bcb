package processor

import (
	"strings"

	"github.com/conduitry/conduit/pkg/plugin"
)

// SettingError says which setting of a processor is wrong. Callers above add
// the pipeline, the processor and the file (the field is
// "settings.<Setting>").
type SettingError = plugin.SettingError

// sdkSchemaSettings accepts Conduit's processor-SDK schema settings
// (sdk.schema.decode.* and sdk.schema.encode.*), so that a pipeline file
// written for Conduit runs unchanged. There is no schema registry here, so
// they change nothing; their values are still checked so that a typo in a
// value is not silently swallowed. Other sdk.* keys are left over and
// reported as unknown, as Conduit does.
func sdkSchemaSettings(s *plugin.Settings) {
	s.Document("sdk.schema.*")
	s.Undocumented(func() {
		for _, k := range []string{"sdk.schema.decode.key.enabled", "sdk.schema.decode.payload.enabled",
			"sdk.schema.encode.key.enabled", "sdk.schema.encode.payload.enabled"} {
			s.Bool(k, false)
		}
		s.Raw("sdk.schema.encode.key.subject")
		s.Raw("sdk.schema.encode.payload.subject")
		if v, ok := s.Raw("sdk.schema.encode.type"); ok && strings.TrimSpace(v) != "avro" {
			s.Failf("sdk.schema.encode.type", "%q is not a schema type (the only one is avro)", v)
		}
	})
}
