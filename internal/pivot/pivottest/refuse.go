package pivottest

import (
	"context"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Refuse makes s's API server refuse op on resource (a plural resource
// name, any group) from now on, as a site's admission policy or a
// failing API server would, with a ValidatingAdmissionPolicy; it returns
// once the refusal is in force, and the returned func lifts it (and
// returns once it is lifted).
func (s *Site) Refuse(t testing.TB, resource string, op admissionv1.OperationType) (lift func()) {
	t.Helper()
	ctx := context.Background()
	name := "refuse-" + resource + "-" + strings.ToLower(string(op))
	// A ConfigMap the policy refuses the same op on: the probe that says
	// when the policy is in force (the API server loads it asynchronously).
	probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}
	if err := s.Client.Create(ctx, probe); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	fail := admissionv1.Fail
	policy := &admissionv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{FailurePolicy: &fail,
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{
				{ResourceNames: nil, RuleWithOperations: admissionv1.RuleWithOperations{Operations: []admissionv1.OperationType{op},
					Rule: admissionv1.Rule{APIGroups: []string{"*"}, APIVersions: []string{"*"}, Resources: []string{resource}}}},
				{ResourceNames: []string{name}, RuleWithOperations: admissionv1.RuleWithOperations{Operations: []admissionv1.OperationType{admissionv1.Update},
					Rule: admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}},
			}},
			Validations: []admissionv1.Validation{{Expression: "false", Message: "slot " + s.Slot + " refuses " + string(op) + " of " + resource}}}}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name, ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny}}}
	for _, o := range []client.Object{policy, binding} {
		if err := s.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	s.waitProbe(t, probe, true)
	return func() {
		t.Helper()
		if err := s.Client.Delete(ctx, binding); err != nil {
			t.Fatal(err)
		}
		s.waitProbe(t, probe, false)
	}
}

// waitProbe waits until a dry-run update of probe is refused (or not).
func (s *Site) waitProbe(t testing.TB, probe *corev1.ConfigMap, refused bool) {
	t.Helper()
	for range 600 {
		p := probe.DeepCopy()
		if err := s.Client.Get(context.Background(), client.ObjectKeyFromObject(p), p); err != nil {
			t.Fatal(err)
		}
		p.Data = map[string]string{"probe": time.Now().String()}
		err := s.Client.Update(context.Background(), p, client.DryRunAll)
		if (err != nil) == refused {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("slot %s: the refusal's policy was not (un)loaded within 60s", s.Slot)
}
