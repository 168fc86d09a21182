//go:build !linux && !darwin

package state

func newProcInfo() procInfo { return noProcs{} }
