package slot

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
)

// The in-cluster name of the slot's registry (zarfRegistry: slot). zarf
// init records the registry as 127.0.0.1:<port>, which the node's
// containerd reaches through its mirror, but a pod does not: its loopback
// is its own. zarf's agent points a Flux OCIRepository at that address,
// unless a NodePort Service has the address's port as its node port; then
// it uses the Service's in-cluster name instead, as it does for zarf's own
// registry (zarf v0.84.0, GetServiceInfoFromRegistryAddress). The slot
// gives its registry container such a Service, under the name of zarf's
// own (zarf-docker-registry in namespace zarf, so a package that names
// zarf's registry by its in-cluster name, as krops' does, finds it too),
// its one endpoint the container's address on the kind network.
const (
	RegistryServiceName      = "zarf-docker-registry"
	RegistryServiceNamespace = "zarf"
	// NodePortMin and NodePortMax bound Kubernetes' default node port range.
	NodePortMin = 30000
	NodePortMax = 32767
)

// registryServiceTimeout bounds the Service's write.
const registryServiceTimeout = 60 * time.Second

// InNodePortRange: port can be a Service's node port.
func InNodePortRange(port int) bool { return port >= NodePortMin && port <= NodePortMax }

// registryService gives the slot's registry container its in-cluster name
// (see RegistryServiceName). A port outside the node port range cannot be
// a node port: it says what in-cluster fetchers will be given, and how to
// change it.
func (m *Manager) registryService(ctx context.Context, rec *Record, n *Names) error {
	if !InNodePortRange(n.RegistryPort) {
		m.logf("  note: registry port %d is outside %d-%d, so zarf's agent points Flux sources at 127.0.0.1:%d, which pods cannot reach; "+
			"for packages whose Flux fetches from the registry, set registryPortBase in config.yaml within that range",
			n.RegistryPort, NodePortMin, NodePortMax, n.RegistryPort)
		return nil
	}
	ip, err := m.containerIP(ctx, n.Registry, "kind")
	if err != nil {
		return err
	}
	cfg, err := restConfig(rec.Kubeconfig, n.Context)
	if err != nil {
		return err
	}
	cfg.Timeout = registryServiceTimeout
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, registryServiceTimeout)
	defer cancel()
	if err := ensureRegistryService(ctx, cs, n.RegistryPort, ip, rec.Name); err != nil {
		return err
	}
	m.logf("  registry in the cluster: %s.%s.svc.cluster.local:5000 (node port %d) -> %s %s:5000",
		RegistryServiceName, RegistryServiceNamespace, n.RegistryPort, n.Registry, ip)
	return nil
}

// containerIP is container's address on network.
func (m *Manager) containerIP(ctx context.Context, container, network string) (string, error) {
	out, err := m.Run.Run(ctx, "docker", "inspect", "--format", "{{json .NetworkSettings.Networks}}", container)
	if err != nil {
		return "", err
	}
	var nets map[string]struct{ IPAddress string }
	if err := json.Unmarshal([]byte(strings.TrimSpace(string(out))), &nets); err != nil {
		return "", fmt.Errorf("reading %s's networks: %w", container, err)
	}
	ip := nets[network].IPAddress
	if net.ParseIP(ip) == nil {
		return "", fmt.Errorf("container %s has no address on network %s (docker inspect %s shows its networks)", container, network, container)
	}
	return ip, nil
}

// ensureRegistryService creates or updates the selector-less NodePort
// Service RegistryServiceName (port 5000, node port nodePort) and its
// EndpointSlice (ip:5000). Run again, it changes only what differs: a
// registry container started again with another address gets it.
func ensureRegistryService(ctx context.Context, cs kubernetes.Interface, nodePort int, ip, slotName string) error {
	labels := map[string]string{"app.kubernetes.io/managed-by": "kubectl-bundle", "kubectl-bundle.dev/slot": slotName}
	ns := RegistryServiceNamespace
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s for the registry's Service: %w", ns, err)
	}
	port := corev1.ServicePort{Name: "registry", Protocol: corev1.ProtocolTCP, Port: 5000, TargetPort: intstr.FromInt32(5000), NodePort: int32(nodePort)}
	svc, err := cs.CoreV1().Services(ns).Get(ctx, RegistryServiceName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		svc = &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: RegistryServiceName, Namespace: ns, Labels: labels},
			Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{port}},
		}
		if _, err := cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating Service %s/%s: %w", ns, RegistryServiceName, err)
		}
	case err != nil:
		return fmt.Errorf("reading Service %s/%s: %w", ns, RegistryServiceName, err)
	case svc.Labels["app.kubernetes.io/managed-by"] != "kubectl-bundle":
		return fmt.Errorf("Service %s/%s exists and is not the slot's (zarf's own registry?): with zarfRegistry slot the slot's registry takes its name; delete it or use zarfRegistry nodeport", ns, RegistryServiceName)
	default:
		svc.Spec.Type, svc.Spec.Selector, svc.Spec.Ports = corev1.ServiceTypeNodePort, nil, []corev1.ServicePort{port}
		if _, err := cs.CoreV1().Services(ns).Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("updating Service %s/%s: %w", ns, RegistryServiceName, err)
		}
	}
	ready := true
	name, proto, p := "registry", corev1.ProtocolTCP, int32(5000)
	eps := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: RegistryServiceName, Namespace: ns, Labels: map[string]string{
			discoveryv1.LabelServiceName: RegistryServiceName,
			discoveryv1.LabelManagedBy:   "kubectl-bundle",
			"kubectl-bundle.dev/slot":    slotName,
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Protocol: &proto, Port: &p}},
	}
	if net.ParseIP(ip).To4() == nil {
		eps.AddressType = discoveryv1.AddressTypeIPv6
	}
	_, err = cs.DiscoveryV1().EndpointSlices(ns).Create(ctx, eps, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		_, err = cs.DiscoveryV1().EndpointSlices(ns).Update(ctx, eps, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("writing EndpointSlice %s/%s (%s:5000): %w", ns, RegistryServiceName, ip, err)
	}
	return nil
}
