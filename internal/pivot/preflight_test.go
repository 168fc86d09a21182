package pivot

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// provider is one entry of clusterctl's inventory.
func provider(name string, typ clusterctlv1.ProviderType, v string) *clusterctlv1.Provider {
	ns := map[clusterctlv1.ProviderType]string{
		clusterctlv1.CoreProviderType:           "capi-system",
		clusterctlv1.BootstrapProviderType:      "capi-kubeadm-bootstrap-system",
		clusterctlv1.ControlPlaneProviderType:   "capi-kubeadm-control-plane-system",
		clusterctlv1.InfrastructureProviderType: "capd-system",
	}[typ]
	return &clusterctlv1.Provider{
		ObjectMeta:   metav1.ObjectMeta{Namespace: ns, Name: string(typ) + "-" + name},
		ProviderName: name, Type: string(typ), Version: v,
	}
}

func inventory(t *testing.T, ps ...*clusterctlv1.Provider) client.Client {
	t.Helper()
	s := runtime.NewScheme()
	if err := clusterctlv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	b := fake.NewClientBuilder().WithScheme(s)
	for _, p := range ps {
		b = b.WithObjects(p)
	}
	return b.Build()
}

// served is a CRD map in which the provider inventory is served or not.
func served(inv bool) map[schema.GroupKind]crdInfo {
	m := map[schema.GroupKind]crdInfo{}
	if inv {
		m[inventoryGK] = crdInfo{served: map[string]bool{clusterctlv1.GroupVersion.Version: true}}
	}
	return m
}

// TestCheckProviders: the provider checks clusterctl's mover would make
// first, each on its own: a side without the inventory, a source provider
// missing on the target, older there, or with no semantic version, and an
// empty source inventory. A target at the same or a newer version passes.
func TestCheckProviders(t *testing.T) {
	core := clusterctlv1.CoreProviderType
	infra := clusterctlv1.InfrastructureProviderType
	source := []*clusterctlv1.Provider{provider("cluster-api", core, "v1.12.1"), provider("docker", infra, "v1.12.1")}
	for _, tc := range []struct {
		name           string
		fromInv, toInv bool
		from, to       []*clusterctlv1.Provider
		want           []string // one substring per expected Unfit line, in order
	}{
		{name: "same versions", fromInv: true, toInv: true, from: source,
			to: []*clusterctlv1.Provider{provider("cluster-api", core, "v1.12.1"), provider("docker", infra, "v1.12.1")}},
		{name: "newer on the target", fromInv: true, toInv: true, from: source,
			to: []*clusterctlv1.Provider{provider("cluster-api", core, "v1.12.3"), provider("docker", infra, "v1.13.0")}},
		{name: "older on the target", fromInv: true, toInv: true, from: source,
			to:   []*clusterctlv1.Provider{provider("cluster-api", core, "v1.12.1"), provider("docker", infra, "v1.11.9")},
			want: []string{"provider infrastructure-docker is older on slot b (1.11.9) than on slot a (1.12.1)"}},
		// Both kubeadm providers are named kubeadm: the refusal tells them apart.
		{name: "two older providers of one name", fromInv: true, toInv: true,
			from: []*clusterctlv1.Provider{provider("kubeadm", clusterctlv1.BootstrapProviderType, "v1.14.2"), provider("kubeadm", clusterctlv1.ControlPlaneProviderType, "v1.14.2")},
			to:   []*clusterctlv1.Provider{provider("kubeadm", clusterctlv1.BootstrapProviderType, "v1.13.6"), provider("kubeadm", clusterctlv1.ControlPlaneProviderType, "v1.13.6")},
			want: []string{"provider bootstrap-kubeadm is older on slot b (1.13.6) than on slot a (1.14.2)", "provider control-plane-kubeadm is older on slot b (1.13.6) than on slot a (1.14.2)"}},
		{name: "missing on the target", fromInv: true, toInv: true, from: source,
			to:   []*clusterctlv1.Provider{provider("cluster-api", core, "v1.12.1")},
			want: []string{"provider docker (InfrastructureProvider v1.12.1) of slot a is not installed on slot b"}},
		{name: "same name, other type", fromInv: true, toInv: true, from: source,
			to:   []*clusterctlv1.Provider{provider("cluster-api", core, "v1.12.1"), provider("docker", clusterctlv1.BootstrapProviderType, "v1.12.1")},
			want: []string{"provider docker (InfrastructureProvider v1.12.1) of slot a is not installed on slot b"}},
		{name: "the newest of several on the target counts", fromInv: true, toInv: true, from: source[:1],
			to: []*clusterctlv1.Provider{provider("cluster-api", core, "v1.11.0"), func() *clusterctlv1.Provider {
				p := provider("cluster-api", core, "v1.12.2")
				p.Namespace = "capi-other"
				return p
			}()}},
		{name: "not a semantic version", fromInv: true, toInv: true,
			from: []*clusterctlv1.Provider{provider("cluster-api", core, "main")},
			to:   []*clusterctlv1.Provider{provider("cluster-api", core, "v1.12.1")},
			want: []string{`provider capi-system/cluster-api on slot a has version "main", which is not a semantic version`}},
		{name: "empty source inventory", fromInv: true, toInv: true, to: source,
			want: []string{"slot a runs no Cluster API provider (its inventory is empty)"}},
		{name: "no inventory on the target", fromInv: true, toInv: false, from: source, to: source,
			want: []string{"slot b has no Cluster API provider inventory"}},
		{name: "no inventory on either", fromInv: false, toInv: false, from: source, to: source,
			want: []string{"slot a has no Cluster API provider inventory", "slot b has no Cluster API provider inventory"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := &Plan{From: "a", To: "b"}
			err := checkProviders(context.Background(), plan, inventory(t, tc.from...), inventory(t, tc.to...), served(tc.fromInv), served(tc.toInv))
			if err != nil {
				t.Fatal(err)
			}
			if len(plan.Unfit) != len(tc.want) {
				t.Fatalf("unfit %q, want %d lines like %q", plan.Unfit, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(plan.Unfit[i], w) {
					t.Errorf("unfit[%d] = %q, want it to say %q", i, plan.Unfit[i], w)
				}
			}
			if err := plan.Check(true); (err != nil) != (len(tc.want) > 0) {
				t.Errorf("Check(yes) = %v with unfit %q", err, plan.Unfit)
			}
		})
	}
}
