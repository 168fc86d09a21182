package verify

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/kubectl-bundle/kubectl-bundle/internal/zst"
)

// Limits on what one archive may hold; beyond them memory would grow with the input.
const (
	MaxMembers          = 1 << 20
	MaxChecksumsSize    = 64 << 20
	maxMemberProblems   = 5
	zstdMaxWindow       = 128 << 20
	tarBlock            = 512
	controlChecksumsTxt = "checksums.txt"
	controlZarfYAML     = "zarf.yaml"
	controlSBOMTar      = "sboms.tar"
)

// member is one archive entry as the single pass saw it.
type member struct {
	dir    bool
	size   int64
	sha256 string
	// mediaType is what a small image blob says it is (digest check).
	mediaType string
	// info is what a manifest or index blob holds (SBOM check).
	info *ManifestInfo
}

// archiveResult is everything the single pass collects.
type archiveResult struct {
	format       string
	containerErr error
	problems     []string
	problemCount int
	members      map[string]*member
	regular      int
	control      map[string][]byte
	controlErr   map[string]error
	sbom         *sbomScan
}

func (a *archiveResult) problem(format string, args ...any) {
	a.problemCount++
	if len(a.problems) < maxMemberProblems {
		a.problems = append(a.problems, fmt.Sprintf(format, args...))
	}
}

// controlLimit returns how many bytes of a member are kept in memory, 0 for
// members that are only hashed.
func controlLimit(name string) int64 {
	switch name {
	case controlZarfYAML:
		return MaxZarfYAMLSize
	case controlChecksumsTxt:
		return MaxChecksumsSize
	case BundleSigName, LegacySigName:
		return MaxSignatureSize
	case controlImageIndex:
		return MaxImageIndexSize
	}
	return 0
}

// countingReader counts bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// readArchive reads the whole archive once: it checks the container and
// every member header, hashes every member, keeps the few small control
// files, and reads sboms.tar as it passes.
func readArchive(ctx context.Context, br *bufio.Reader) *archiveResult {
	a := &archiveResult{members: map[string]*member{}, control: map[string][]byte{}, controlErr: map[string]error{}}
	head, _ := br.Peek(tarBlock)
	var stream io.Reader
	switch {
	case len(head) >= 4 && string(head[:4]) == zst.Magic:
		a.format = "zstd-compressed tar"
		dec, err := zst.NewReader(br, zstdMaxWindow)
		if err != nil {
			a.containerErr = fmt.Errorf("starting zstd: %w", err)
			return a
		}
		defer dec.Close()
		stream = dec
	case len(head) == tarBlock && isTarHeader(head):
		a.format = "tar"
		stream = br
	default:
		a.containerErr = fmt.Errorf("not a zstd-compressed or plain tar archive")
		return a
	}
	cr := &countingReader{r: stream}
	tr := tar.NewReader(cr)
	buf := make([]byte, 1<<20)
	hs := newMemberHasher()
	defer hs.Close()
	for {
		if err := ctx.Err(); err != nil {
			a.containerErr = err
			return a
		}
		before := cr.n
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			// archive/tar also reports EOF when the input simply stops at a
			// header boundary. Only a real end-of-archive marker (two zero
			// blocks, after at most one block of padding) is a complete archive.
			if cr.n-before < 2*tarBlock {
				a.containerErr = fmt.Errorf("archive is truncated: it ends after %d members without the tar end-of-archive marker", len(a.members))
				return a
			}
			break
		}
		if err != nil {
			a.containerErr = describeStreamErr("reading tar header", err)
			return a
		}
		if len(a.members) >= MaxMembers {
			a.containerErr = fmt.Errorf("archive holds more than %d members", MaxMembers)
			return a
		}
		name := h.Name
		isDir := false
		switch h.Typeflag {
		case tar.TypeReg:
		case tar.TypeDir:
			isDir = true
			if len(name) > 1 && name[len(name)-1] == '/' {
				name = name[:len(name)-1]
			}
		default:
			a.problem("member %q is %s, not a regular file or directory", truncate(h.Name, 120), typeName(h.Typeflag))
		}
		if err := checkMemberPath(name); err != nil {
			a.problem("member %v", err)
		}
		if _, dup := a.members[name]; dup {
			a.problem("duplicate member %q: an archive that names a member twice is ambiguous (zarf keeps the last copy)", truncate(name, 120))
		}
		m := &member{dir: isDir, size: h.Size}
		a.members[name] = m
		if h.Typeflag != tar.TypeReg {
			continue
		}
		a.regular++
		mc := &countingReader{r: tr}
		var body io.Reader = mc
		var kept *bytes.Buffer
		if limit := controlLimit(name); limit > 0 {
			if h.Size > limit {
				a.controlErr[name] = fmt.Errorf("%s is %d bytes, over the %d byte limit", name, h.Size, limit)
			} else {
				kept = bytes.NewBuffer(make([]byte, 0, h.Size))
				body = io.TeeReader(mc, kept)
			}
		}
		var blob *bytes.Buffer
		if kept == nil && h.Size <= maxSniffedBlob && strings.HasPrefix(name, imageBlobPrefix) {
			blob = bytes.NewBuffer(make([]byte, 0, h.Size))
			body = io.TeeReader(mc, blob)
		}
		if name == controlSBOMTar {
			scan := scanSBOMTar(io.TeeReader(mc, hs))
			a.sbom = &scan
		}
		if _, err := io.CopyBuffer(hs, body, buf); err != nil {
			a.containerErr = describeStreamErr(fmt.Sprintf("reading member %s", name), err)
			return a
		}
		if mc.n != h.Size {
			a.containerErr = fmt.Errorf("member %s is truncated", name)
			return a
		}
		hs.End(m)
		if blob != nil {
			m.mediaType = sniffMediaType(blob.Bytes())
			if kindOf(m.mediaType) != "" {
				m.info, _ = ParseManifestInfo(blob.Bytes())
			}
		}
		if kept != nil {
			a.control[name] = kept.Bytes()
		}
	}
	hs.Close()
	// Past the end-of-archive marker only zero padding may follow, and the
	// compressed stream must end cleanly (zstd checks its frame checksums here).
	if err := expectZeros(cr, buf); err != nil {
		a.containerErr = err
	}
	return a
}

func expectZeros(r io.Reader, buf []byte) error {
	for {
		n, err := r.Read(buf)
		for _, c := range buf[:n] {
			if c != 0 {
				return fmt.Errorf("data after the tar end-of-archive marker")
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return describeStreamErr("reading past the end-of-archive marker", err)
		}
	}
}

func describeStreamErr(doing string, err error) error {
	var ioe *IOError
	if errors.As(err, &ioe) {
		return err
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%s: archive is truncated", doing)
	}
	return fmt.Errorf("%s: %w", doing, err)
}

func isTarHeader(b []byte) bool {
	magic := b[257:263]
	return bytes.Equal(magic, []byte("ustar\x00")) || bytes.Equal(magic, []byte("ustar ")) || bytes.Equal(b[257:262], []byte("ustar"))
}

func typeName(t byte) string {
	switch t {
	case tar.TypeSymlink:
		return "a symlink"
	case tar.TypeLink:
		return "a hard link"
	case tar.TypeChar, tar.TypeBlock:
		return "a device"
	case tar.TypeFifo:
		return "a FIFO"
	default:
		return fmt.Sprintf("of tar type %q", t)
	}
}
