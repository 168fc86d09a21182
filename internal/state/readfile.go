package state

import (
	"errors"
	"io/fs"
	"syscall"
)

// ReadFile reads the file at p, at most limit+1 bytes when limit >= 0 (so
// that a caller can tell a file larger than limit), not following a final
// symlink when noFollow is set (then a symlink fails with ELOOP). Its
// errors are *fs.PathError, as os.ReadFile's.
//
// It opens and reads with plain system calls: an *os.File of a regular
// file is made non-blocking and offered to the poller, three more calls
// per file that are half the cost of reading the state dir's small files
// (BenchmarkModel); the state dir is read many times per command.
func ReadFile(p string, limit int64, noFollow bool) ([]byte, error) {
	flags := syscall.O_RDONLY | syscall.O_CLOEXEC
	if noFollow {
		flags |= syscall.O_NOFOLLOW
	}
	var fd int
	var err error
	for {
		if fd, err = syscall.Open(p, flags, 0); !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: p, Err: err}
	}
	defer syscall.Close(fd)
	// Sized by the file's length when it tells one (a history of some
	// hundred KB read by every command: growing the buffer from 1 KB cost
	// a copy and a zeroed allocation at each doubling). The read stops at
	// the length fstat told, without the call that would find the end: it
	// is what the file held then, as a read an instant earlier would be
	// (one call of five per file); a file whose length is not told reads
	// to its end.
	size, told := 1024, -1
	var st syscall.Stat_t
	if syscall.Fstat(fd, &st) == nil && st.Mode&syscall.S_IFMT == syscall.S_IFREG && st.Size > 0 {
		size = int(min(st.Size, 1<<30)) + 1
		if st.Size < 1<<30 {
			told = int(st.Size)
		}
		if limit >= 0 && int64(size) > limit+1 {
			size = int(limit + 1)
		}
	}
	b := make([]byte, 0, size)
	for limit < 0 || int64(len(b)) <= limit {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		end := cap(b)
		if limit >= 0 && int64(end) > limit+1 {
			end = int(limit + 1)
		}
		n, err := syscall.Read(fd, b[len(b):end])
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: p, Err: err}
		}
		if n == 0 {
			break
		}
		b = b[:len(b)+n]
		if len(b) == told {
			break
		}
	}
	return b, nil
}
