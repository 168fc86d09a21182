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
// is its own. A pod that fetches from the registry itself, such as Flux's
// source-controller fetching the config artifact, needs a name that
// resolves in the cluster. The slot gives its registry container the one
// zarf's own registry has (zarf-docker-registry in namespace zarf, so a
// package that names zarf's registry by its in-cluster name, as krops'
// does, finds it): a ClusterIP Service without a selector whose one
// endpoint is the container's address on the kind network. Not a
// NodePort: zarf would then take the registry for one inside the cluster
// and push through a port-forward to a pod (seen on the bench).
const (
	RegistryServiceName      = "zarf-docker-registry"
	RegistryServiceNamespace = "zarf"
)

// registryServiceTimeout bounds the Service's write.
const registryServiceTimeout = 60 * time.Second

// registryService gives the slot's registry container its in-cluster name
// (see RegistryServiceName): its address on network.
func (m *Manager) registryService(ctx context.Context, rec *Record, n *Names, network string) error {
	ip, err := m.containerIP(ctx, n.Registry, network)
	if err != nil {
		return err
	}
	write := m.WriteRegistryService
	if write == nil {
		write = writeRegistryService
	}
	if err := write(ctx, rec.Kubeconfig, n.Context, ip, rec.Name); err != nil {
		return err
	}
	m.logf("  registry in the cluster: %s.%s.svc.cluster.local:5000 -> %s %s:5000",
		RegistryServiceName, RegistryServiceNamespace, n.Registry, ip)
	return nil
}

// RefreshRegistryService writes slot slotName's registry Service again
// with the address its registry container has now. A switch moves the
// registry alias by reconnecting registry containers to the network, and
// Docker gives a reconnected container another address: the Service
// written at create would lead nowhere, and the slot's Flux would lose its
// source. Nothing is done for a slot without one: another zarfRegistry or
// provider, an adopted slot, or one whose create has not written it yet.
func (m *Manager) RefreshRegistryService(ctx context.Context, slotName string) error {
	if m.Config.ZarfRegistry != ZarfRegistrySlot || m.Config.Provider != ProviderKind {
		return nil
	}
	rec, err := Load(m.Dir, slotName)
	if err != nil {
		return err
	}
	if rec.Adopted {
		return nil
	}
	n, err := m.NamesOf(slotName)
	if err != nil {
		return err
	}
	if m.WriteRegistryService == nil {
		cs, err := clientset(rec.Kubeconfig, n.Context, registryServiceTimeout)
		if err != nil {
			return err
		}
		gctx, cancel := context.WithTimeout(ctx, registryServiceTimeout)
		_, err = cs.CoreV1().Services(RegistryServiceNamespace).Get(gctx, RegistryServiceName, metav1.GetOptions{})
		cancel()
		if apierrors.IsNotFound(err) {
			return nil // create's zarf-init step writes it
		}
		if err != nil {
			return fmt.Errorf("reading Service %s/%s of slot %s: %w", RegistryServiceNamespace, RegistryServiceName, slotName, err)
		}
	}
	return m.registryService(ctx, rec, n, m.Config.Network)
}

// writeRegistryService is ensureRegistryService in the cluster of
// kubeconfig's context.
func writeRegistryService(ctx context.Context, kubeconfig, kubeContext, ip, slotName string) error {
	cs, err := clientset(kubeconfig, kubeContext, registryServiceTimeout)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, registryServiceTimeout)
	defer cancel()
	return ensureRegistryService(ctx, cs, ip, slotName)
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

// ensureRegistryService creates or updates the selector-less ClusterIP
// Service RegistryServiceName (port 5000) and its EndpointSlice (ip:5000). Run again, it changes only what differs: a
// registry container started again with another address gets it.
func ensureRegistryService(ctx context.Context, cs kubernetes.Interface, ip, slotName string) error {
	labels := map[string]string{"app.kubernetes.io/managed-by": "kubectl-bundle", "kubectl-bundle.dev/slot": slotName}
	ns := RegistryServiceNamespace
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s for the registry's Service: %w", ns, err)
	}
	port := corev1.ServicePort{Name: "registry", Protocol: corev1.ProtocolTCP, Port: 5000, TargetPort: intstr.FromInt32(5000)}
	svc, err := cs.CoreV1().Services(ns).Get(ctx, RegistryServiceName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		svc = &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: RegistryServiceName, Namespace: ns, Labels: labels},
			Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Ports: []corev1.ServicePort{port}},
		}
		if _, err := cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating Service %s/%s: %w", ns, RegistryServiceName, err)
		}
	case err != nil:
		return fmt.Errorf("reading Service %s/%s: %w", ns, RegistryServiceName, err)
	case svc.Labels["app.kubernetes.io/managed-by"] != "kubectl-bundle":
		return fmt.Errorf("Service %s/%s exists and is not the slot's (zarf's own registry?): with zarfRegistry slot the slot's registry takes its name; delete it or use zarfRegistry nodeport", ns, RegistryServiceName)
	default:
		svc.Spec.Type, svc.Spec.Selector, svc.Spec.Ports = corev1.ServiceTypeClusterIP, nil, []corev1.ServicePort{port}
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
