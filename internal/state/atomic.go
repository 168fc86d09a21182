package state

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/renameio/v2"
)

// WriteFile replaces path atomically: temp file in the same dir, fsync,
// rename, fsync of the dir. A reader sees the old or the new content, never a mix.
func WriteFile(path string, data []byte) error {
	if err := renameio.WriteFile(path, data, FileMode); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return SyncDir(filepath.Dir(path))
}

// SyncDir fsyncs a directory so that a rename or create in it survives a crash.
func SyncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("opening %s to sync: %w", dir, err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("syncing %s: %w", dir, err)
	}
	return nil
}
