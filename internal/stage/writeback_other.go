//go:build !linux

package stage

// StartWriteback bounds dirty data where there is no sync_file_range
// (macOS, the operator's laptop): the window before the last is flushed
// with fsync, so the commit still waits for one window only.
func (f *writebackFile) StartWriteback(upTo int64) {
	if f.started > f.waited {
		_ = f.Sync()
		f.waited = f.started
	}
	f.started = upTo
}
