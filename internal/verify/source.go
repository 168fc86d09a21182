package verify

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/kubectl-bundle/kubectl-bundle/internal/errkind"
	"github.com/kubectl-bundle/kubectl-bundle/internal/zarfsplit"
)

// SplitMetadata is the JSON zarf writes into a split package's .part000.
type SplitMetadata = zarfsplit.Metadata

// MaxSplitParts is zarf's own limit on parts.
const MaxSplitParts = zarfsplit.MaxParts

// IOError marks a failure to read the input (an environment failure), as
// opposed to an input that reads fine and is bad (a negative verdict).
type IOError struct{ Err error }

func (e *IOError) Error() string { return e.Err.Error() }
func (e *IOError) Unwrap() error { return e.Err }

// ErrorKind: failing to read the input is an environment failure.
func (e *IOError) ErrorKind() errkind.Kind { return errkind.Environment }

// source is the archive's bytes, as one stream, however they are stored.
type source struct {
	name   string // the archive's name: for a split package, without .part000
	size   int64
	split  *SplitMetadata
	parts  []*os.File
	reader io.Reader
}

func (s *source) Close() {
	for _, f := range s.parts {
		f.Close()
	}
}

// ioReader tags read errors from the files as IOErrors.
type ioReader struct{ r io.Reader }

func (r ioReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		err = &IOError{Err: err}
	}
	return n, err
}

// ParseSplitMetadata parses a .part000 file.
func ParseSplitMetadata(b []byte) (*SplitMetadata, error) { return zarfsplit.Parse(b) }

// openSource opens a package read-only. For a .part000 it opens every part
// and checks the metadata's count and byte total against them before any
// byte is read; the parts are then read in order as one stream, never joined on disk.
// splitErr is a verdict about the split metadata (a failure, exit 1); err is
// an I/O error.
func openSource(path string) (s *source, splitErr error, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, namedFileError("opening package", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, &IOError{Err: fmt.Errorf("reading package: %w", err)}
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, usagef("package %s is not a regular file", path)
	}
	base := path[strings.LastIndex(path, "/")+1:]
	if !strings.HasSuffix(path, ".part000") {
		return &source{name: base, size: fi.Size(), parts: []*os.File{f}, reader: ioReader{f}}, nil, nil
	}
	s = &source{name: strings.TrimSuffix(base, ".part000"), parts: []*os.File{f}}
	b, err := io.ReadAll(io.LimitReader(f, 4097))
	if err != nil {
		s.Close()
		return nil, nil, &IOError{Err: fmt.Errorf("reading %s: %w", path, err)}
	}
	if len(b) > 4096 {
		s.Close()
		return nil, fmt.Errorf("part000 is larger than 4 KiB: not zarf split metadata"), nil
	}
	meta, perr := ParseSplitMetadata(b)
	if perr != nil {
		s.Close()
		return nil, perr, nil
	}
	s.split = meta
	prefix := strings.TrimSuffix(path, ".part000")
	var readers []io.Reader
	var total int64
	for i := 1; i <= meta.Count; i++ {
		p := fmt.Sprintf("%s.part%03d", prefix, i)
		pf, err := os.Open(p)
		if errors.Is(err, os.ErrNotExist) {
			s.Close()
			return nil, fmt.Errorf("part000 says %d parts but %s is missing", meta.Count, p), nil
		}
		if err != nil {
			s.Close()
			return nil, nil, &IOError{Err: fmt.Errorf("opening %s: %w", p, err)}
		}
		s.parts = append(s.parts, pf)
		pfi, err := pf.Stat()
		if err != nil {
			s.Close()
			return nil, nil, &IOError{Err: fmt.Errorf("reading %s: %w", p, err)}
		}
		if !pfi.Mode().IsRegular() {
			s.Close()
			return nil, fmt.Errorf("%s is not a regular file", p), nil
		}
		total += pfi.Size()
		readers = append(readers, pf)
	}
	extra := fmt.Sprintf("%s.part%03d", prefix, meta.Count+1)
	if _, err := os.Lstat(extra); err == nil {
		s.Close()
		return nil, fmt.Errorf("part000 says %d parts but %s also exists", meta.Count, extra), nil
	}
	if total != meta.Bytes {
		s.Close()
		return nil, fmt.Errorf("part000 says %d bytes but parts 001..%03d hold %d", meta.Bytes, meta.Count, total), nil
	}
	s.size = total
	s.reader = ioReader{io.MultiReader(readers...)}
	return s, nil, nil
}
