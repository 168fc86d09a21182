package stage

import "golang.org/x/sys/unix"

// StartWriteback starts writing [started, upTo) and waits for what was
// started the time before (sync_file_range: Linux only).
func (f *writebackFile) StartWriteback(upTo int64) {
	fd := int(f.Fd())
	if f.started > f.waited {
		_ = unix.SyncFileRange(fd, f.waited, f.started-f.waited, unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE|unix.SYNC_FILE_RANGE_WAIT_AFTER)
		f.waited = f.started
	}
	_ = unix.SyncFileRange(fd, f.started, upTo-f.started, unix.SYNC_FILE_RANGE_WRITE)
	f.started = upTo
}
