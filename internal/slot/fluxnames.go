package slot

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-bundle/kubectl-bundle/internal/fluxart"
	"github.com/kubectl-bundle/kubectl-bundle/internal/record"
)

// fluxNamesTimeout bounds create's write of the Flux settings.
const fluxNamesTimeout = 60 * time.Second

// writeFluxSettings writes the slot's values of the package's Flux
// variables into its cluster before the package is deployed: the
// ConfigMap fluxart.SlotConfigMap of each namespace, which the artifact's
// Kustomizations substitute from (docs/krops.md, "Two slots side by
// side"). A namespace that does not exist yet (Flux is installed by the
// deploy) is created; a ConfigMap there already is replaced by the slot's
// values.
func (m *Manager) writeFluxSettings(ctx context.Context, rec *Record, settings []record.FluxSetting) error {
	cs, err := clientset(rec.Kubeconfig, rec.Context, fluxNamesTimeout)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, fluxNamesTimeout)
	defer cancel()
	byNS := map[string]map[string]string{}
	var order []string
	for _, s := range settings {
		if byNS[s.Namespace] == nil {
			byNS[s.Namespace] = map[string]string{}
			order = append(order, s.Namespace)
		}
		byNS[s.Namespace][s.Variable] = s.Value
	}
	labels := map[string]string{"app.kubernetes.io/managed-by": "kubectl-bundle", "kubectl-bundle.dev/slot": rec.Name}
	for _, ns := range order {
		_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating namespace %s for the Flux settings: %w", ns, err)
		}
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fluxart.SlotConfigMap, Namespace: ns, Labels: labels}, Data: byNS[ns]}
		_, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			_, err = cs.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
		}
		if err != nil {
			return fmt.Errorf("writing ConfigMap %s/%s: %w", ns, fluxart.SlotConfigMap, err)
		}
		for v, val := range byNS[ns] {
			m.logf("  %s=%s (ConfigMap %s/%s)", v, val, ns, fluxart.SlotConfigMap)
		}
	}
	return nil
}

// FluxLine is settings on one line: NAMESPACE/VARIABLE=VALUE, ...
func FluxLine(settings []record.FluxSetting) string {
	var parts []string
	for _, f := range settings {
		parts = append(parts, f.Namespace+"/"+f.Variable+"="+f.Value)
	}
	return strings.Join(parts, ", ")
}

// fluxOrDefaults is FluxLine, or what a slot without settings gets.
func fluxOrDefaults(settings []record.FluxSetting) string {
	if len(settings) == 0 {
		return "the artifact's defaults"
	}
	return FluxLine(settings)
}
