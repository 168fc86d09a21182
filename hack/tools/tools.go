//go:build tools

// Package tools pins the real programs the tests run (zarf) so that
// `go build` in this module builds exactly the pinned versions.
package tools

import _ "github.com/zarf-dev/zarf"
