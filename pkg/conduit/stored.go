package conduit

import (
	"encoding/json"
	"fmt"
	"time"
)

// The formats of the records pkg/conduit persists: pipelines created
// through the API (store.PrefixAPIPipeline) and managed recovery rules
// (store.PrefixManagedRule). testdata/*.golden.json pins each.
//
// WARNING: these are part of the on-disk format. A change that an older
// record no longer decodes as needs a new version and a reader of the old
// one.
const (
	// storedPipelineVersion is the version of storedPipeline. Records
	// written before it carried a version have none, and read as version 1.
	storedPipelineVersion = 1
	// storedRuleVersion is the version of storedRule; a record without one
	// reads as version 1.
	storedRuleVersion = 1
)

// storedPipeline is a pipeline created through the API as the store keeps
// it. The file it was applied with is kept beside it, once for all its
// pipelines (PrefixAPIPipelineFile + its hash), and parsed again at every
// start, so that the pipeline is read exactly as a file under
// pipelines.path is, and errors name the lines the user wrote.
type storedPipeline struct {
	Version int    `json:"version"`
	ID      string `json:"id"`
	// Name is the file's name on the client, for messages.
	Name      string    `json:"name"`
	FileHash  string    `json:"fileHash"`
	AppliedAt time.Time `json:"appliedAt"`
}

// storedRule is a managed recovery rule as the store keeps it: its YAML as
// written, read again at every start with the parser of rules files.
type storedRule struct {
	Version int    `json:"version"`
	Name    string `json:"name"`
	YAML    string `json:"yaml"`
	// File and Line say where it was loaded from (the client's file).
	File     string    `json:"file"`
	Line     int       `json:"line"`
	LoadedAt time.Time `json:"loadedAt"`
}

// encodeStoredPipeline is sp as the store keeps it, in the current version.
func encodeStoredPipeline(sp storedPipeline) ([]byte, error) {
	sp.Version = storedPipelineVersion
	return json.Marshal(sp)
}

// decodeStoredPipeline reads a stored pipeline of this version or an
// older one.
func decodeStoredPipeline(data []byte) (storedPipeline, error) {
	var sp storedPipeline
	if err := json.Unmarshal(data, &sp); err != nil {
		return storedPipeline{}, err
	}
	if err := checkStoredVersion(&sp.Version, storedPipelineVersion); err != nil {
		return storedPipeline{}, err
	}
	return sp, nil
}

// encodeStoredRule is sr as the store keeps it, in the current version.
func encodeStoredRule(sr storedRule) ([]byte, error) {
	sr.Version = storedRuleVersion
	return json.Marshal(sr)
}

// decodeStoredRule reads a stored rule of this version or an older one.
func decodeStoredRule(data []byte) (storedRule, error) {
	var sr storedRule
	if err := json.Unmarshal(data, &sr); err != nil {
		return storedRule{}, err
	}
	if err := checkStoredVersion(&sr.Version, storedRuleVersion); err != nil {
		return storedRule{}, err
	}
	return sr, nil
}

// checkStoredVersion takes a record without a version (written before
// records carried one) as version 1, and refuses one newer than current:
// a newer conduit wrote it, in a format this one cannot know.
func checkStoredVersion(version *int, current int) error {
	if *version == 0 {
		*version = 1
	}
	if *version > current {
		return fmt.Errorf("format version %d, this conduit reads %d", *version, current)
	}
	return nil
}
