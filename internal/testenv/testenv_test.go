package testenv

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// TestRealAPIServer starts the pinned kube-apiserver and etcd and round-trips
// an object through them.
func TestRealAPIServer(t *testing.T) {
	start := time.Now()
	cfg := Start(t)
	t.Logf("API server up in %s", time.Since(start).Round(time.Millisecond))
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if want := kubePin(t); v.GitVersion != want {
		t.Errorf("server version %q, want %s, pinned in hack/tools/node/go.mod", v.GitVersion, want)
	}
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: "default"}, Data: map[string]string{"k": "v"}}
	if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "probe", metav1.GetOptions{})
	if err != nil || got.Data["k"] != "v" {
		t.Fatalf("%v %+v", err, got)
	}
}

// kubePin is the k8s.io/kubernetes version hack/tools/node/go.mod pins, read
// as the Makefile reads it: the version after the module path, outside
// comments.
func kubePin(t *testing.T) string {
	t.Helper()
	p := filepath.Join(RepoRoot(), "hack", "tools", "node", "go.mod")
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] == "//" {
			continue
		}
		for i := 0; i+1 < len(f); i++ {
			if f[i] == "k8s.io/kubernetes" {
				return f[i+1]
			}
		}
	}
	t.Fatalf("%s does not pin k8s.io/kubernetes", p)
	return ""
}

// TestKubePin: the pin reader finds the version the Makefile builds.
func TestKubePin(t *testing.T) {
	v := kubePin(t)
	if !strings.HasPrefix(v, "v1.") || strings.Count(v, ".") != 2 {
		t.Errorf("pin %q is not a v1.x.y version", v)
	}
}
