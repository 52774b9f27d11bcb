package processor

import "testing"

// Every processor is described with Conduit's specification of it, named
// as Conduit lists its built-in processors.
func TestSpecifications(t *testing.T) {
	got := map[string]int{}
	for _, s := range NewRegistry(Builtin()...).Specifications() {
		got[s.Name] = len(s.Parameters)
		if s.Summary == "" {
			t.Errorf("%s has no summary", s.Name)
		}
	}
	for name, params := range map[string]int{"builtin:field.set@v0.1.0": 2, "builtin:filter@v0.1.0": 0,
		"builtin:json.decode@v0.1.0": 1, "builtin:error@v0.1.0": 1} {
		if n, ok := got[name]; !ok || n < params {
			t.Errorf("%s: listed %v with %d parameters, want at least %d (all: %v)", name, ok, n, params, got)
		}
	}
}
