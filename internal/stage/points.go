package stage

// CrashPoints lists, in order, the write points of a commit that crash
// tests kill the process at (see state.CrashPoint).
var CrashPoints = []string{
	"stage:before-fsync", "stage:before-name", "stage:before-sidecar",
	"stage:before-record", "stage:before-commit", "stage:after-commit",
}
