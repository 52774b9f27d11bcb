package reconciler

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"unicode"

	"github.com/conduitry/conduit/pkg/config"
)

// locationKeys are the parts of a parsed pipeline that say where it was
// written, not what it runs: moving a pipeline within its file, or adding
// a comment above it, changes none of what it does.
var locationKeys = map[string]bool{"File": true, "Line": true, "Path": true, "SettingLines": true}

// canonical is p as plain values (maps, lists, scalars) without
// locationKeys, the common ground of Fingerprint and Diff.
func canonical(p config.Pipeline) (any, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("pipeline %s: %w", p.ID, err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("pipeline %s: %w", p.ID, err)
	}
	return stripLocations(v), nil
}

func stripLocations(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			e = stripLocations(e)
			// A field left out and one at its zero value read the same in
			// a file, and a field added to the format later must not
			// change the fingerprint of every pipeline that does not use
			// it.
			if locationKeys[k] || isZero(e) {
				delete(v, k)
				continue
			}
			v[k] = e
		}
	case []any:
		for i, e := range v {
			v[i] = stripLocations(e)
		}
	}
	return v
}

func isZero(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case string:
		return v == ""
	case bool:
		return !v
	case float64:
		return v == 0
	case map[string]any:
		return len(v) == 0
	case []any:
		return len(v) == 0
	}
	return false
}

// Fingerprint identifies what a pipeline runs: two pipelines with the same
// fingerprint behave the same, wherever they are written.
func Fingerprint(p config.Pipeline) (string, error) {
	v, err := canonical(p)
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(v) // maps marshal with sorted keys
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:8]), nil
}

// Diff lists the fields that differ between two versions of a pipeline,
// named as in a pipeline file ("connectors[src].settings.rate",
// "processors (order)"), sorted.
func Diff(before, after config.Pipeline) ([]string, error) {
	a, err := canonical(before)
	if err != nil {
		return nil, err
	}
	b, err := canonical(after)
	if err != nil {
		return nil, err
	}
	fa, fb := map[string]string{}, map[string]string{}
	flatten("", a, fa)
	flatten("", b, fb)
	set := map[string]bool{}
	for k, v := range fa {
		if w, ok := fb[k]; !ok || w != v {
			set[entryOf(k, fa, fb)] = true
		}
	}
	for k := range fb {
		if _, ok := fa[k]; !ok {
			set[entryOf(k, fa, fb)] = true
		}
	}
	changed := make([]string, 0, len(set))
	for k := range set {
		changed = append(changed, k)
	}
	sort.Strings(changed)
	return changed, nil
}

// entryOf names a field of a connector or processor that only one version
// has by that connector or processor ("processors[p1]"): a new or removed
// entry is one change, not one per field.
func entryOf(field string, a, b map[string]string) string {
	for i := 0; i < len(field); i++ {
		if field[i] != ']' {
			continue
		}
		entry := field[:i+1]
		_, inA := a[entry+entryMarker]
		_, inB := b[entry+entryMarker]
		if inA != inB {
			return entry
		}
	}
	return field
}

// entryMarker marks, in a flattened pipeline, that an entry with an id
// exists.
const entryMarker = "\x00entry"

// flatten writes every leaf of v under its path. Lists of entries with an
// ID are keyed by it, as errors name them, and their order is a field of
// its own ("processors (order)"): processors run in order.
func flatten(path string, v any, out map[string]string) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			flatten(join(path, fieldName(path, k)), e, out)
		}
	case []any:
		ids := make([]string, 0, len(v))
		keyed := false
		for i, e := range v {
			id := fmt.Sprint(i)
			if m, ok := e.(map[string]any); ok {
				if s, ok := m["ID"].(string); ok && s != "" {
					id, keyed = s, true
				}
			}
			ids = append(ids, id)
			if keyed {
				out[path+"["+id+"]"+entryMarker] = ""
			}
			flatten(path+"["+id+"]", e, out)
		}
		if keyed {
			out[path+" (order)"] = strings.Join(ids, ",")
		}
	case nil:
		// An absent value and an empty one read the same in a file.
	default:
		b, _ := json.Marshal(v)
		out[path] = string(b)
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// fieldName turns a Go field name into the key a pipeline file uses
// (ErrorRecovery -> error-recovery); keys inside settings stay as written.
func fieldName(path, key string) string {
	if strings.HasSuffix(path, "settings") || strings.HasSuffix(path, "Settings") {
		return key
	}
	switch key {
	case "DLQ":
		return "dead-letter-queue"
	case "ID":
		return "id"
	}
	var b strings.Builder
	for i, r := range key {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('-')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}
