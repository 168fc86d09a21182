package state

import "golang.org/x/sys/unix"

// newProcInfo binds darwinProcs (proc.go, tested on Linux with fakes) to
// darwin's sysctl and lsof.
func newProcInfo() procInfo {
	return darwinProcs{
		kinfo: func(pid int) (int64, int64, error) {
			k, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
			if err != nil {
				return 0, 0, err
			}
			if int(k.Proc.P_pid) != pid {
				return 0, 0, unix.ESRCH
			}
			return int64(k.Proc.P_starttime.Sec), int64(k.Proc.P_starttime.Usec), nil
		},
		procargs: func(pid int) ([]byte, error) { return unix.SysctlRaw("kern.procargs2", pid) },
		lsof:     runLsof,
	}
}
