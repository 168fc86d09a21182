//go:build tools

// Package tools pins the Cluster API controllers the bench builds as images
// (hack/images/capi.sh): the core manager, the kubeadm bootstrap and
// control-plane providers (sigs.k8s.io/cluster-api) and CAPD, the Docker
// infrastructure provider (sigs.k8s.io/cluster-api/test), with the kustomize
// library that renders their manifests from the modules' config trees.
package tools

import (
	_ "sigs.k8s.io/cluster-api/bootstrap/kubeadm"
	_ "sigs.k8s.io/cluster-api/controlplane/kubeadm"
	_ "sigs.k8s.io/cluster-api/core"
	_ "sigs.k8s.io/cluster-api/test/infrastructure/docker"
)
