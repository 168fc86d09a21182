package release

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/kubectl-bundle/kubectl-bundle/internal/journal"
)

// The strategy scripts' archive (.goreleaser.yaml): one for every
// platform, everything under journal.ScriptsDir, which an operator unpacks beside
// the plugins, where the journal's next command names the scripts.
const ScriptsArchivePrefix = "kubectl-bundle-scripts_"

// scriptFiles is what the scripts archive must hold, and whether each must
// be executable.
var scriptFiles = map[string]bool{
	"blue-green.sh": true, "in-place.sh": true, "recreate.sh": true,
	"lib.sh": false, "README.md": false, "LICENSE": false,
}

// checkScripts finds the one scripts archive checksums.txt lists and checks
// it holds every script (executable), lib.sh, README.md and LICENSE under
// journal.ScriptsDir. It returns the archive's name.
func checkScripts(dist string, listed map[string]string) (string, error) {
	var found []string
	for name := range listed {
		if strings.HasPrefix(name, ScriptsArchivePrefix) && strings.HasSuffix(name, ".tar.gz") {
			found = append(found, name)
		}
	}
	sort.Strings(found)
	if len(found) != 1 {
		return "", fmt.Errorf("checksums.txt lists %d strategy script archives (%s*.tar.gz), want 1: %v", len(found), ScriptsArchivePrefix, found)
	}
	return found[0], checkScriptsArchive(filepath.Join(dist, found[0]))
}

func checkScriptsArchive(archive string) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return fmt.Errorf("%s: %w", filepath.Base(archive), err)
	}
	tr := tar.NewReader(zr)
	seen := map[string]bool{}
	var errs []error
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("%s: %w", filepath.Base(archive), err)
		}
		dir, name := path.Split(path.Clean(h.Name))
		exec, ok := scriptFiles[name]
		if !ok || path.Clean(dir) != journal.ScriptsDir {
			continue
		}
		seen[name] = true
		switch {
		case h.Typeflag != tar.TypeReg:
			errs = append(errs, fmt.Errorf("%s is not a regular file (type %q)", h.Name, h.Typeflag))
		case exec && h.Mode&0o111 == 0:
			errs = append(errs, fmt.Errorf("%s is not executable (mode %o): the printed next commands run it", h.Name, h.Mode))
		}
	}
	var names []string
	for n := range scriptFiles {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if !seen[n] {
			errs = append(errs, fmt.Errorf("no %s/%s", journal.ScriptsDir, n))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%s: %w", filepath.Base(archive), err)
	}
	return nil
}
