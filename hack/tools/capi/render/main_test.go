package main

import (
	"bytes"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// A provider tree shaped as Cluster API's config/default: a Deployment
// mounting the webhook Secret, its Service, a webhook configuration and a
// CRD with a conversion webhook, cert-manager's Issuer and Certificate, and
// clusterctl variables.
var tree = map[string]string{
	"kustomization.yaml": `namespace: capx-system
namePrefix: capx-
resources:
- objects.yaml
`,
	"objects.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: controller-manager
  namespace: system
spec:
  template:
    spec:
      containers:
      - name: manager
        image: upstream/manager:main
        args: ["--feature-gates=MachinePool=${EXP_MACHINE_POOL:=true}", "--sync=${SYNC:=10m}"]
      - name: sidecar
        image: upstream/sidecar:1
      volumes:
      - name: cert
        secret:
          secretName: capx-webhook-service-cert
---
apiVersion: v1
kind: Service
metadata:
  name: webhook-service
  namespace: system
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: validating-webhook-configuration
  annotations:
    cert-manager.io/inject-ca-from: capx-system/capx-serving-cert
webhooks:
- name: a.example
  clientConfig:
    service: {name: webhook-service, namespace: system}
- name: b.example
  clientConfig:
    service: {name: webhook-service, namespace: system}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: things.example
  annotations:
    cert-manager.io/inject-ca-from: capx-system/capx-serving-cert
spec:
  conversion:
    strategy: Webhook
    webhook:
      clientConfig:
        service: {name: webhook-service, namespace: system}
---
apiVersion: cert-manager.io/v1
kind: Issuer
metadata:
  name: selfsigned-issuer
  namespace: system
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata:
  name: serving-cert
  namespace: system
`,
}

func writeTree(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range tree {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func render(t *testing.T, vars sets) (map[string]map[string]any, []byte) {
	t.Helper()
	dir, ca, out := writeTree(t), filepath.Join(t.TempDir(), "ca"), filepath.Join(t.TempDir(), "out.yaml")
	if err := run(dir, "kb-bench/capx:v1", ca, out, vars); err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	objs := map[string]map[string]any{}
	for _, d := range bytes.Split(text, []byte("---\n")) {
		var o map[string]any
		if err := yaml.Unmarshal(d, &o); err != nil {
			t.Fatal(err)
		}
		if o != nil {
			objs[str(o, "kind")+"/"+str(obj(o, "metadata"), "name")] = o
		}
	}
	caPEM, err := os.ReadFile(filepath.Join(ca, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	return objs, caPEM
}

func TestRenderReplacesCertManagerAndImage(t *testing.T) {
	objs, caPEM := render(t, sets{"SYNC": "1m"})
	for k := range objs {
		if strings.HasPrefix(k, "Issuer/") || strings.HasPrefix(k, "Certificate/") {
			t.Errorf("cert-manager object %s kept", k)
		}
	}
	dep := objs["Deployment/capx-controller-manager"]
	cs := obj(obj(obj(dep, "spec"), "template"), "spec")["containers"].([]any)
	mgr, side := cs[0].(map[string]any), cs[1].(map[string]any)
	if mgr["image"] != "kb-bench/capx:v1" || mgr["imagePullPolicy"] != "IfNotPresent" {
		t.Errorf("manager container: image %v, pull policy %v", mgr["image"], mgr["imagePullPolicy"])
	}
	if side["image"] != "upstream/sidecar:1" {
		t.Errorf("a container not named manager was changed: %v", side["image"])
	}
	if args := mgr["args"].([]any); args[0] != "--feature-gates=MachinePool=true" || args[1] != "--sync=1m" {
		t.Errorf("variables: default or -set value not substituted: %v", args)
	}
	caB64 := base64.StdEncoding.EncodeToString(caPEM)
	hooks := objs["ValidatingWebhookConfiguration/capx-validating-webhook-configuration"]
	if _, ok := obj(hooks, "metadata")["annotations"]; ok {
		t.Error("the cert-manager annotation is kept on the webhook configuration")
	}
	for _, h := range hooks["webhooks"].([]any) {
		if got := str(obj(h.(map[string]any), "clientConfig"), "caBundle"); got != caB64 {
			t.Errorf("webhook %v: caBundle is not the bench CA", h.(map[string]any)["name"])
		}
	}
	crd := objs["CustomResourceDefinition/things.example"]
	if got := str(obj(obj(obj(obj(crd, "spec"), "conversion"), "webhook"), "clientConfig"), "caBundle"); got != caB64 {
		t.Error("the CRD's conversion webhook has no caBundle of the bench CA")
	}

	sec := objs["Secret/capx-webhook-service-cert"]
	if sec == nil || str(obj(sec, "metadata"), "namespace") != "capx-system" || str(sec, "type") != "kubernetes.io/tls" {
		t.Fatalf("no kubernetes.io/tls Secret capx-webhook-service-cert in capx-system: %v", sec)
	}
	crtPEM, _ := base64.StdEncoding.DecodeString(str(obj(sec, "data"), "tls.crt"))
	b, _ := pem.Decode(crtPEM)
	if b == nil {
		t.Fatal("tls.crt is not PEM")
	}
	crt, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	if _, err := crt.Verify(x509.VerifyOptions{DNSName: "capx-webhook-service.capx-system.svc", Roots: pool}); err != nil {
		t.Errorf("the serving certificate does not verify for the Service's name against the CA: %v", err)
	}
}

func TestRenderRefusesAVariableWithoutValue(t *testing.T) {
	dir := writeTree(t)
	body := strings.Replace(tree["objects.yaml"], "${SYNC:=10m}", "${SYNC}", 1)
	if err := os.WriteFile(filepath.Join(dir, "objects.yaml"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	err := run(dir, "kb-bench/capx:v1", filepath.Join(t.TempDir(), "ca"), filepath.Join(t.TempDir(), "out.yaml"), sets{})
	if err == nil || !strings.Contains(err.Error(), "SYNC") {
		t.Fatalf("want an error naming SYNC, got %v", err)
	}
}
