package state

func newProcInfo() procInfo { return linuxProcs{root: "/proc"} }
