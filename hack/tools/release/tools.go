//go:build tools

package tools

import _ "github.com/goreleaser/goreleaser/v2"
