//go:build tools

// Package tools pins cosign, which signs a release's checksums file into a
// Sigstore bundle (.goreleaser.yaml) and verifies it in the release test.
package tools

import _ "github.com/sigstore/cosign/v3/cmd/cosign"
