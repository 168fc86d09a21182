// Command render writes one Cluster API provider's manifests as the bench
// installs them, from the provider's config/default kustomize tree in the
// module cache, without cert-manager:
//
//	render -kustomize DIR -image REF -ca DIR -o FILE [-set NAME=VALUE]...
//
// It runs the kustomize library on DIR, substitutes the ${NAME:=default}
// variables clusterctl would (a -set value, else the default), drops the
// cert-manager Issuer and Certificate, gives the manager container image REF
// (pulled only if not present), and writes the webhook serving certificate
// the Deployment mounts as a Secret of its own, signed by the bench's CA in
// -ca DIR (ca.crt, ca.key; made there on first use), whose certificate it
// also sets as the caBundle of every webhook and CRD conversion webhook.
package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

type sets map[string]string

func (s sets) String() string { return fmt.Sprint(map[string]string(s)) }
func (s sets) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok {
		return fmt.Errorf("-set %q: want NAME=VALUE", v)
	}
	s[k] = val
	return nil
}

func main() {
	dir := flag.String("kustomize", "", "the provider's config/default directory")
	image := flag.String("image", "", "the manager container's image")
	caDir := flag.String("ca", "", "directory of the bench's CA (ca.crt, ca.key; made if missing)")
	out := flag.String("o", "", "output file")
	vars := sets{}
	flag.Var(vars, "set", "NAME=VALUE for a ${NAME} variable (repeatable)")
	flag.Parse()
	if *dir == "" || *image == "" || *caDir == "" || *out == "" {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*dir, *image, *caDir, *out, vars); err != nil {
		fmt.Fprintln(os.Stderr, "render:", err)
		os.Exit(1)
	}
}

var varRE = regexp.MustCompile(`\$\{([A-Za-z0-9_]+)(:=([^}]*))?\}`)

func run(dir, image, caDir, out string, vars sets) error {
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return fmt.Errorf("kustomize %s: %w", dir, err)
	}
	text, err := m.AsYaml()
	if err != nil {
		return err
	}
	var missing []string
	text = varRE.ReplaceAllFunc(text, func(b []byte) []byte {
		g := varRE.FindSubmatch(b)
		if v, ok := vars[string(g[1])]; ok {
			return []byte(v)
		}
		if g[2] == nil {
			missing = append(missing, string(g[1]))
			return b
		}
		return g[3]
	})
	if len(missing) > 0 {
		return fmt.Errorf("variables without a default or -set: %s", strings.Join(missing, ", "))
	}
	ca, caKey, caPEM, err := loadCA(caDir)
	if err != nil {
		return err
	}
	var docs []map[string]any
	for _, d := range bytes.Split(text, []byte("\n---\n")) {
		var o map[string]any
		if err := yaml.Unmarshal(d, &o); err != nil {
			return err
		}
		if o == nil {
			continue
		}
		if strings.HasPrefix(str(o, "apiVersion"), "cert-manager.io/") {
			continue
		}
		docs = append(docs, o)
	}
	caB64 := base64.StdEncoding.EncodeToString(caPEM)
	services := map[string]string{} // namespace -> webhook Service name
	for _, o := range docs {
		if str(o, "kind") == "Service" && strings.HasSuffix(str(obj(o, "metadata"), "name"), "webhook-service") {
			md := obj(o, "metadata")
			services[str(md, "namespace")] = str(md, "name")
		}
	}
	var secrets []map[string]any
	images := 0
	for _, o := range docs {
		md := obj(o, "metadata")
		if ann := obj(md, "annotations"); ann != nil {
			delete(ann, "cert-manager.io/inject-ca-from")
			if len(ann) == 0 {
				delete(md, "annotations")
			}
		}
		switch str(o, "kind") {
		case "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration":
			hooks, _ := o["webhooks"].([]any)
			for _, h := range hooks {
				if cc := obj(h.(map[string]any), "clientConfig"); cc != nil {
					cc["caBundle"] = caB64
				}
			}
		case "CustomResourceDefinition":
			if cc := obj(obj(obj(obj(o, "spec"), "conversion"), "webhook"), "clientConfig"); cc != nil {
				cc["caBundle"] = caB64
			}
		case "Deployment":
			pod := obj(obj(obj(o, "spec"), "template"), "spec")
			cs, _ := pod["containers"].([]any)
			for _, c := range cs {
				c := c.(map[string]any)
				if str(c, "name") == "manager" {
					c["image"] = image
					c["imagePullPolicy"] = "IfNotPresent"
					images++
				}
			}
			vols, _ := pod["volumes"].([]any)
			for _, v := range vols {
				sec := obj(v.(map[string]any), "secret")
				if sec == nil {
					continue
				}
				ns := str(md, "namespace")
				svc := services[ns]
				if svc == "" {
					return fmt.Errorf("deployment %s/%s mounts secret %s but %s has no webhook Service", ns, str(md, "name"), str(sec, "secretName"), ns)
				}
				s, err := servingSecret(ca, caKey, caPEM, ns, str(sec, "secretName"), svc)
				if err != nil {
					return err
				}
				secrets = append(secrets, s)
			}
		}
	}
	if images == 0 {
		return errors.New("no Deployment with a container named manager")
	}
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "# rendered by hack/tools/capi/render from %s (image %s)\n", filepath.Base(filepath.Dir(filepath.Dir(dir))), image)
	for _, o := range append(docs, secrets...) {
		b, err := yaml.Marshal(o)
		if err != nil {
			return err
		}
		buf.WriteString("---\n")
		buf.Write(b)
	}
	return os.WriteFile(out, buf.Bytes(), 0o644)
}

func obj(o map[string]any, k string) map[string]any {
	if o == nil {
		return nil
	}
	v, _ := o[k].(map[string]any)
	return v
}

func str(o map[string]any, k string) string {
	if o == nil {
		return ""
	}
	v, _ := o[k].(string)
	return v
}

// loadCA reads the bench's CA from dir, making it first if it is not there.
func loadCA(dir string) (*x509.Certificate, *ecdsa.PrivateKey, []byte, error) {
	crtPath, keyPath := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	if _, err := os.Stat(crtPath); errors.Is(err, os.ErrNotExist) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, nil, err
		}
		tmpl := &x509.Certificate{
			SerialNumber:          serial(),
			Subject:               pkix.Name{CommonName: "kubectl-bundle bench Cluster API webhook CA"},
			NotBefore:             time.Now().Add(-time.Hour),
			NotAfter:              time.Now().AddDate(10, 0, 0),
			KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
			BasicConstraintsValid: true,
			IsCA:                  true,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			return nil, nil, nil, err
		}
		kder, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return nil, nil, nil, err
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, nil, nil, err
		}
		if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
			return nil, nil, nil, err
		}
		if err := os.WriteFile(crtPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
			return nil, nil, nil, err
		}
	}
	crtPEM, err := os.ReadFile(crtPath)
	if err != nil {
		return nil, nil, nil, err
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, nil, nil, err
	}
	cb, _ := pem.Decode(crtPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, nil, nil, fmt.Errorf("%s: ca.crt or ca.key is not PEM", dir)
	}
	crt, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, nil, err
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, nil, err
	}
	return crt, key, crtPEM, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		panic(err)
	}
	return n
}

// servingSecret is the kubernetes.io/tls Secret name in namespace ns that
// the webhook server behind Service svc serves with.
func servingSecret(ca *x509.Certificate, caKey *ecdsa.PrivateKey, caPEM []byte, ns, name, svc string) (map[string]any, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	dns := []string{svc + "." + ns + ".svc", svc + "." + ns + ".svc.cluster.local"}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: dns[0]},
		DNSNames:     dns,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().AddDate(5, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	b64 := func(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
	return map[string]any{
		"apiVersion": "v1",
		"kind":       "Secret",
		"type":       "kubernetes.io/tls",
		"metadata":   map[string]any{"name": name, "namespace": ns, "labels": map[string]any{"dev.kubectl-bundle.bench": "capi-webhook-cert"}},
		"data": map[string]any{
			"tls.crt": b64(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
			"tls.key": b64(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})),
			"ca.crt":  b64(caPEM),
		},
	}, nil
}
