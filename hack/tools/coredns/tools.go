//go:build tools

// Package tools pins CoreDNS, the cluster DNS of the kind node image.
package tools

import _ "github.com/coredns/coredns"
