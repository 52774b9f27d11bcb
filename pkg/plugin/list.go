package plugin

import (
	"maps"
	"slices"
)

// All returns the set's plugins sorted by name, for listings.
func (s *Set[P]) All() []P {
	out := make([]P, 0, len(s.plugins))
	for _, name := range slices.Sorted(maps.Keys(s.plugins)) {
		out = append(out, s.plugins[name])
	}
	return out
}
