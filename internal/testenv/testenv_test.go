package testenv

import (
	"context"
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
	if v.GitVersion != "v1.34.4" {
		t.Errorf("server version %q, want the pinned v1.34.4", v.GitVersion)
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
