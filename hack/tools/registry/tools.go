//go:build tools

// Package tools pins the registry of the slot's registry image.
package tools

import _ "github.com/distribution/distribution/v3/cmd/registry"
