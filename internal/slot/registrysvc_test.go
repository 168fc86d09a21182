package slot

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestEnsureRegistryService: the slot's registry gets a selector-less
// ClusterIP Service under zarf's registry name (no node port: zarf would
// push through a port-forward to one) and one endpoint, the container's address; run again with a new
// address, the endpoint follows; a Service of that name that is not the
// slot's (zarf's own registry) is refused, not taken over.
func TestEnsureRegistryService(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset()
	if err := ensureRegistryService(ctx, cs, "172.18.0.3", "b"); err != nil {
		t.Fatal(err)
	}
	check := func(ip string) {
		t.Helper()
		svc, err := cs.CoreV1().Services("zarf").Get(ctx, "zarf-docker-registry", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if svc.Spec.Type != corev1.ServiceTypeClusterIP || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].NodePort != 0 || svc.Spec.Ports[0].Port != 5000 || svc.Spec.Selector != nil {
			t.Errorf("Service: %+v", svc.Spec)
		}
		eps, err := cs.DiscoveryV1().EndpointSlices("zarf").Get(ctx, "zarf-docker-registry", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if eps.Labels[discoveryv1.LabelServiceName] != "zarf-docker-registry" || len(eps.Endpoints) != 1 || eps.Endpoints[0].Addresses[0] != ip || *eps.Ports[0].Port != 5000 {
			t.Errorf("EndpointSlice: %+v", eps)
		}
	}
	check("172.18.0.3")
	if err := ensureRegistryService(ctx, cs, "172.18.0.9", "b"); err != nil {
		t.Fatal(err)
	}
	check("172.18.0.9")

	zarfs := fake.NewClientset(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "zarf-docker-registry", Namespace: "zarf"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: map[string]string{"app": "docker-registry"}}})
	err := ensureRegistryService(ctx, zarfs, "172.18.0.3", "b")
	if err == nil || !strings.Contains(err.Error(), "is not the slot's") {
		t.Errorf("zarf's own Service: %v", err)
	}
	svc, _ := zarfs.CoreV1().Services("zarf").Get(ctx, "zarf-docker-registry", metav1.GetOptions{})
	if svc.Spec.Selector["app"] != "docker-registry" {
		t.Errorf("zarf's own Service was changed: %+v", svc.Spec)
	}
}
