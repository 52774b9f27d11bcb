package processor

import (
	sdk "github.com/conduitio/conduit-processor-sdk"
	"github.com/conduitio/conduit/pkg/foundation/log"
	"github.com/conduitio/conduit/pkg/plugin/processor/builtin/impl"
	"github.com/conduitio/conduit/pkg/plugin/processor/builtin/impl/custom"
	"github.com/conduitio/conduit/pkg/plugin/processor/builtin/impl/field"
)

// sameAsConduit are the processors this package implements itself with
// Conduit's settings and behaviour; Conduit's specifications describe
// them.
var sameAsConduit = map[string]func(log.CtxLogger) sdk.Processor{
	"custom.javascript": func(l log.CtxLogger) sdk.Processor { return custom.NewJavascriptProcessor(l) },
	"error":             impl.NewErrorProcessor,
	"field.exclude":     func(l log.CtxLogger) sdk.Processor { return field.NewExcludeProcessor(l) },
	"field.set":         func(l log.CtxLogger) sdk.Processor { return field.NewSetProcessor(l) },
	"filter":            func(l log.CtxLogger) sdk.Processor { return impl.NewFilterProcessor(l) },
	"clone":             func(l log.CtxLogger) sdk.Processor { return impl.NewCloneProcessor(l) },
	"split":             func(l log.CtxLogger) sdk.Processor { return impl.NewSplitProcessor(l) },
}

// Specifications describes the registry's processors, sorted by name, as
// Conduit describes its built-in processors. Each Name is the plugin's
// full reference, builtin:name@version, as Conduit lists them.
func (r *Registry) Specifications() []sdk.Specification {
	constructors := map[string]func(log.CtxLogger) sdk.Processor{}
	for name, c := range sameAsConduit {
		constructors[name] = c
	}
	for _, c := range conduitConstructors {
		constructors[c.name] = c.newProc
	}
	quietSDKLogs()
	var out []sdk.Specification
	for _, p := range r.set.All() {
		spec := sdk.Specification{Name: p.Name, Version: "v0.1.0", Author: "conduit"}
		if c, ok := constructors[p.Name]; ok {
			if s, err := c(log.Nop()).Specification(); err == nil {
				spec = s
			}
		}
		spec.Name = "builtin:" + p.Name + "@" + spec.Version
		out = append(out, spec)
	}
	return out
}
