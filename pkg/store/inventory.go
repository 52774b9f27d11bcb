package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// inventoryFile is conduit's own record of the Badger directory, beside
// Badger's files. Badger's MANIFEST says which tables hold the data, but a
// MANIFEST cut short, or a table or write-ahead log lost in a partial
// restore, looks to Badger like a normal directory: it deletes the tables
// the MANIFEST does not list and starts over. The inventory lets the next
// open tell a store as conduit left it from a damaged one.
//
// Persisted format: a JSON object; fields may be added, never renamed.
const inventoryFile = "CONDUIT-INVENTORY"

// inventoryVersion is the format version written; a newer one is refused.
const inventoryVersion = 1

// inventory is what the last process recorded about the directory.
type inventory struct {
	Version int `json:"version"`
	// Clean is true when the last process closed the store. The fields
	// below then describe the directory exactly as it was left: nothing
	// writes it until the next open.
	Clean        bool             `json:"clean"`
	ManifestSize int64            `json:"manifest_size,omitempty"`
	Tables       map[string]int64 `json:"tables,omitempty"`
	ValueLogs    map[string]int64 `json:"value_logs,omitempty"`
	WALs         []string         `json:"write_ahead_logs,omitempty"`
	// HighestWAL is the highest write-ahead log (memtable) file id seen
	// while the store was open. Badger numbers them in order and deletes
	// one only after its data is in a table, so after a crash the newest
	// one must still be there.
	HighestWAL uint32 `json:"highest_write_ahead_log,omitempty"`
}

// storeFiles is what a Badger directory holds, by kind.
type storeFiles struct {
	tables    map[uint64]string // id -> file name
	sizes     map[string]int64  // file name -> size, for every kind
	valueLogs []string          // value log files
	vlogData  []string          // value log files with more than a header
	wals      map[uint32]string // id -> file name
}

func listStoreFiles(dir string) (storeFiles, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return storeFiles{}, err
	}
	f := storeFiles{tables: map[uint64]string{}, sizes: map[string]int64{}, wals: map[uint32]string{}}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		name := e.Name()
		info, err := e.Info()
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return storeFiles{}, err
		}
		switch filepath.Ext(name) {
		case ".sst":
			if id, ok := parseFileID(name, ".sst"); ok {
				f.tables[id] = name
				f.sizes[name] = info.Size()
			}
		case ".vlog":
			f.valueLogs = append(f.valueLogs, name)
			f.sizes[name] = info.Size()
			if info.Size() > logHeaderSize {
				f.vlogData = append(f.vlogData, name)
			}
		case ".mem":
			if isPreparedWAL(info.Size()) {
				continue // conduit's own, empty: holds nothing
			}
			if id, ok := parseFileID(name, ".mem"); ok && id <= 1<<32-1 {
				f.wals[uint32(id)] = name
				f.sizes[name] = info.Size()
			}
		}
	}
	return f, nil
}

// parseFileID reads the number of a Badger file name such as 000012.sst.
func parseFileID(name, ext string) (uint64, bool) {
	id, err := strconv.ParseUint(strings.TrimSuffix(name, ext), 10, 64)
	return id, err == nil
}

func (f storeFiles) highestWAL() uint32 {
	var top uint32
	for id := range f.wals {
		top = max(top, id)
	}
	return top
}

// takeInventory records dir as a closed store leaves it.
func takeInventory(dir string) (inventory, error) {
	files, err := listStoreFiles(dir)
	if err != nil {
		return inventory{}, err
	}
	inv := inventory{Version: inventoryVersion, Clean: true, Tables: map[string]int64{}, ValueLogs: map[string]int64{},
		HighestWAL: files.highestWAL()}
	info, err := os.Stat(filepath.Join(dir, manifestFile))
	if err != nil {
		return inventory{}, err
	}
	inv.ManifestSize = info.Size()
	for _, name := range files.tables {
		inv.Tables[name] = files.sizes[name]
	}
	for _, name := range files.valueLogs {
		inv.ValueLogs[name] = files.sizes[name]
	}
	for _, name := range files.wals {
		inv.WALs = append(inv.WALs, name)
	}
	slices.Sort(inv.WALs)
	return inv, nil
}

// readInventory reads dir's inventory; found is false when there is none
// (a new store, or one written before conduit kept an inventory).
func readInventory(dir string) (inv inventory, found bool, err error) {
	path := filepath.Join(dir, inventoryFile)
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return inventory{}, false, nil
	}
	if err != nil {
		return inventory{}, false, fmt.Errorf("read %s: %w", path, err)
	}
	if err := json.Unmarshal(raw, &inv); err != nil {
		return inventory{}, false, newCorruptError(dir, fmt.Sprintf("%s is unreadable (%v)", inventoryFile, err))
	}
	if inv.Version < 1 || inv.Version > inventoryVersion {
		return inventory{}, false, newCorruptError(dir, fmt.Sprintf("%s has format version %d, this conduit reads up to %d", inventoryFile, inv.Version, inventoryVersion))
	}
	return inv, true, nil
}

// writeInventory replaces dir's inventory atomically and durably: a crash
// leaves the old one or the new one, never a mix.
func writeInventory(dir string, inv inventory) error {
	inv.Version = inventoryVersion
	raw, err := json.Marshal(inv)
	if err != nil {
		return err
	}
	path := filepath.Join(dir, inventoryFile)
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	_, werr := f.Write(append(raw, '\n'))
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}

// compareClean lists how dir differs from the inventory of a clean stop:
// nothing may have changed since, so every difference is damage or a
// partial restore.
func compareClean(dir string, inv inventory, files storeFiles) []string {
	var problems []string
	if info, err := os.Stat(filepath.Join(dir, manifestFile)); err == nil && info.Size() != inv.ManifestSize {
		problems = append(problems, fmt.Sprintf("%s is %d bytes, conduit's clean stop left it at %d bytes", manifestFile, info.Size(), inv.ManifestSize))
	}
	present := map[string]bool{}
	for _, name := range files.tables {
		present[name] = true
	}
	for _, name := range files.wals {
		present[name] = true
	}
	for _, name := range files.valueLogs {
		present[name] = true
	}
	expect := func(kind string, recorded map[string]int64) {
		for _, name := range sortedKeys(recorded) {
			size, ok := files.sizes[name]
			switch {
			case !present[name] || !ok:
				problems = append(problems, fmt.Sprintf("%s %s is missing", kind, name))
			case size != recorded[name]:
				problems = append(problems, fmt.Sprintf("%s %s is %d bytes, conduit's clean stop left it at %d bytes", kind, name, size, recorded[name]))
			}
		}
	}
	expect("table", inv.Tables)
	expect("value log", inv.ValueLogs)
	wals := map[string]int64{}
	for _, name := range inv.WALs {
		wals[name] = files.sizes[name]
	}
	expect("write-ahead log", wals)

	for _, id := range sortedKeys(files.tables) {
		if name := files.tables[id]; !hasKey(inv.Tables, name) {
			problems = append(problems, fmt.Sprintf("table %s was not part of the store conduit stopped", name))
		}
	}
	for _, id := range sortedKeys(files.wals) {
		if name := files.wals[id]; !slices.Contains(inv.WALs, name) {
			problems = append(problems, fmt.Sprintf("write-ahead log %s was not part of the store conduit stopped", name))
		}
	}
	return problems
}

// checkWALsAfterCrash lists the write-ahead logs a store that was not
// closed must still hold: Badger numbers them in order and deletes the
// oldest first, once its data is in a table, so the ids left are
// consecutive and end at the highest one the last process recorded.
func checkWALsAfterCrash(inv inventory, files storeFiles) []string {
	var problems []string
	ids := sortedKeys(files.wals)
	top := files.highestWAL()
	if inv.HighestWAL > top {
		var missing []string
		first := top + 1
		if inv.HighestWAL > first+4 {
			first = inv.HighestWAL - 4 // name the newest few
		}
		for id := first; id <= inv.HighestWAL; id++ {
			missing = append(missing, walName(id))
		}
		problems = append(problems, fmt.Sprintf("write-ahead log %s is missing (the last process wrote up to %s and did not stop cleanly)",
			strings.Join(missing, ", "), walName(inv.HighestWAL)))
	}
	for i := 1; i < len(ids); i++ {
		for id := ids[i-1] + 1; id < ids[i]; id++ {
			problems = append(problems, fmt.Sprintf("write-ahead log %s is missing between %s and %s", walName(id), files.wals[ids[i-1]], files.wals[ids[i]]))
		}
	}
	return problems
}

func hasKey[K comparable, V any](m map[K]V, k K) bool {
	_, ok := m[k]
	return ok
}

func walName(id uint32) string { return fmt.Sprintf("%05d.mem", id) }

func sortedKeys[K interface{ ~string | ~uint32 | ~uint64 }, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
