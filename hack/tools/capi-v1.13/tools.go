//go:build tools

// Package tools pins the older Cluster API the bench installs on a slot to
// show `switch --mode pivot` refusing a target whose providers are older than
// the source's (hack/capd/pivot.sh): the core manager and the kubeadm
// bootstrap and control-plane providers of sigs.k8s.io/cluster-api v1.13.6
// (the newest v1.13 release of that module the Go module proxy serves; it
// refuses v1.13.7) and CAPD from sigs.k8s.io/cluster-api/test v1.13.7. The
// kustomize renderer is hack/tools/capi's: rendering does not depend on the
// Cluster API version.
package tools

import (
	_ "sigs.k8s.io/cluster-api"
	_ "sigs.k8s.io/cluster-api/bootstrap/kubeadm"
	_ "sigs.k8s.io/cluster-api/controlplane/kubeadm"
	_ "sigs.k8s.io/cluster-api/test/infrastructure/docker"
)
