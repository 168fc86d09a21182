//go:build tools

// Package tools pins the Flux controllers the bench builds as images
// (hack/flux/images.sh): source-controller (it fetches the OCI artifact from
// the slot's registry) and kustomize-controller (it builds and applies it,
// substituting the slot's names).
package tools

import (
	_ "github.com/fluxcd/kustomize-controller"
	_ "github.com/fluxcd/source-controller"
)
