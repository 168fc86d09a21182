package evidence

import (
	"archive/tar"
	"crypto"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/kubectl-bundle/kubectl-bundle/internal/advice"
	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
	"github.com/kubectl-bundle/kubectl-bundle/internal/sigblob"
	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

// Files of an export besides the evidence itself.
const (
	SumsFile      = "SHA256SUMS"
	SignatureFile = "SHA256SUMS.sigstore.json"
)

// ExportOptions say where an export goes and whether it is signed.
type ExportOptions struct {
	// Dir receives the files (created; must be empty when it exists).
	Dir string
	// Tar receives them as a tar archive under evidence-<ID>/ instead.
	Tar string
	// Signer, when set, signs SHA256SUMS into a Sigstore bundle that
	// `cosign verify-blob --key PUB --bundle SHA256SUMS.sigstore.json
	// --insecure-ignore-tlog=true SHA256SUMS` checks offline.
	Signer crypto.Signer
}

// Exported says what an export wrote.
type Exported struct {
	ID     string   `json:"id"`
	Files  []string `json:"files"`
	Sums   string   `json:"sums"`
	Signed bool     `json:"signed"`
	Path   string   `json:"path"`
	// Skipped lists what was left out (not a regular file: damage).
	Skipped []string `json:"skipped,omitempty"`
}

// NotFoundError is a transaction with no evidence.
type NotFoundError struct{ ID, Path string }

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("no evidence of transaction %s (%s): %s shows the transactions that have some", e.ID, e.Path, advice.Plugin("journal", "evidence", "--list"))
}

// Export writes the evidence of id, with the history events of id read
// fresh from the journal, a sha256sum -c file and, with a signer, its
// signature.
func Export(d *state.Dir, id string, o ExportOptions) (*Exported, error) {
	if err := ValidID(id); err != nil {
		return nil, err
	}
	src := Path(d, id)
	if fi, err := os.Lstat(src); err != nil || !fi.IsDir() {
		return nil, &NotFoundError{ID: id, Path: src}
	}
	files := map[string][]byte{}
	out := &Exported{ID: id}
	err := filepath.WalkDir(src, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		switch {
		case e.IsDir():
			return nil
		case !e.Type().IsRegular():
			out.Skipped = append(out.Skipped, rel)
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files[filepath.ToSlash(rel)] = b
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the evidence of %s: %w", id, err)
	}
	// The history as the journal has it now (a transaction still open
	// has more than its stored copy).
	if h, err := historyOf(d, id); err == nil && len(h) > 0 {
		files[HistoryFile] = h
	}
	delete(files, SumsFile)
	delete(files, SignatureFile)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	var sums strings.Builder
	for _, n := range names {
		sum := sha256.Sum256(files[n])
		fmt.Fprintf(&sums, "%s  %s\n", hex.EncodeToString(sum[:]), n)
	}
	files[SumsFile] = []byte(sums.String())
	out.Files = names
	out.Sums = SumsFile
	if o.Signer != nil {
		sig, err := sigblob.SignBlob(files[SumsFile], o.Signer)
		if err != nil {
			return nil, fmt.Errorf("signing %s: %w", SumsFile, err)
		}
		files[SignatureFile] = sig
		out.Signed = true
	}
	all := append(append([]string{}, names...), SumsFile)
	if out.Signed {
		all = append(all, SignatureFile)
	}
	switch {
	case o.Tar != "":
		out.Path = o.Tar
		return out, writeTar(o.Tar, "evidence-"+id, all, files)
	default:
		out.Path = o.Dir
		return out, writeDir(o.Dir, all, files)
	}
}

func writeDir(dir string, names []string, files map[string][]byte) error {
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return &UsageError{fmt.Errorf("-o %s is not empty: export into a new directory", dir)}
	}
	for _, n := range names {
		p := filepath.Join(dir, filepath.FromSlash(n))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, files[n], 0o644); err != nil {
			return err
		}
	}
	return nil
}

func writeTar(p, top string, names []string, files map[string][]byte) error {
	tmp := p + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	tw := tar.NewWriter(f)
	now := time.Now().UTC().Truncate(time.Second)
	dirs := map[string]bool{}
	for _, n := range names {
		for d := filepath.ToSlash(filepath.Dir(top + "/" + n)); d != "." && !dirs[d]; d = filepath.ToSlash(filepath.Dir(d)) {
			dirs[d] = true
		}
	}
	dirList := make([]string, 0, len(dirs))
	for d := range dirs {
		dirList = append(dirList, d)
	}
	sort.Strings(dirList)
	for _, d := range dirList {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: now}); err != nil {
			f.Close()
			return err
		}
	}
	for _, n := range names {
		b := files[n]
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: top + "/" + n, Mode: 0o644, Size: int64(len(b)), ModTime: now}); err != nil {
			f.Close()
			return err
		}
		if _, err := tw.Write(b); err != nil {
			f.Close()
			return err
		}
	}
	if err := tw.Close(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}

// UsageError is an export the operator asked for wrongly.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// List returns the ids that have evidence, oldest first.
func List(d *state.Dir) ([]string, error) {
	entries, err := os.ReadDir(d.Join(Dir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range entries {
		if e.IsDir() && ValidID(e.Name()) == nil {
			ids = append(ids, e.Name())
		}
	}
	sort.Strings(ids) // ids begin with their UTC time
	return ids, nil
}

// ErrorKind: a bad -o is a usage error.
func (e *UsageError) ErrorKind() errkind.Kind { return errkind.Usage }

// ErrorKind: naming a transaction with no evidence is a usage error.
func (e *NotFoundError) ErrorKind() errkind.Kind { return errkind.Usage }
