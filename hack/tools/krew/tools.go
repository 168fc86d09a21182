//go:build tools

// Package tools pins krew, which the release test uses to install every
// plugin from its krew manifest and archive the way an air-gapped operator
// does (krew install --manifest=... --archive=...).
package tools

import _ "sigs.k8s.io/krew/cmd/krew"
