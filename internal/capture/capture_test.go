package capture

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubectl-bundle/kubectl-bundle/internal/fakes"
	"github.com/kubectl-bundle/kubectl-bundle/internal/testenv"
)

const secretValue = "s3cret-PASSWORD-4711"

func crdDir() string {
	return filepath.Join(testenv.RepoRoot(), "testdata", "crds")
}

// fakeContainers starts the fake docker's containers: two of slot b, one
// of another slot.
func fakeContainers(t *testing.T) fakes.Runner {
	t.Helper()
	fakes.Setup(t)
	r := fakes.Runner{}
	for _, name := range []string{"airgap-mgmt-b-control-plane", "krops-registry-airgap-b", "airgap-mgmt-a-control-plane"} {
		if _, err := r.Run(context.Background(), "docker", "run", "-d", "--name", name, "kindest/node:v1.36.4"); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

func ofSlotB(name string) bool {
	return strings.HasPrefix(name, "airgap-mgmt-b-") || name == "krops-registry-airgap-b"
}

func read(t *testing.T, dir, file string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		t.Fatalf("the capture lacks %s: %v", file, err)
	}
	return string(b)
}

// A capture of a slot with a failing pod: its pods, description, events,
// nodes, Cluster API objects and the slot's containers and their logs are
// there, and a Secret's value appears nowhere, whatever refers to it.
func TestCapture(t *testing.T) {
	cfg := testenv.Start(t, crdDir())
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "app"}}, metav1.CreateOptions{}))
	must(cs.CoreV1().Secrets("app").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db"},
		StringData: map[string]string{"password": secretValue}}, metav1.CreateOptions{}))
	must(cs.CoreV1().Pods("app").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "main", Image: "127.0.0.1:31999/web:1", Env: []corev1.EnvVar{{Name: "DB_PASSWORD",
			ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "password"}}}}}},
		Volumes: []corev1.Volume{{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "db"}}}},
	}}, metav1.CreateOptions{}))
	must(cs.CoreV1().Events("app").Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "web.1"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "app", Name: "web"}, Reason: "Failed", Type: "Warning",
		Message: "Back-off pulling image 127.0.0.1:31999/web:1", LastTimestamp: metav1.Now()}, metav1.CreateOptions{}))
	dyn := dynamic.NewForConfigOrDie(cfg)
	capi := schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "clusters"}
	must(dyn.Resource(capi).Namespace("default").Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "metadata": map[string]any{"name": "airgap-wl-b"},
		"spec": map[string]any{"controlPlaneEndpoint": map[string]any{"host": "10.0.0.1", "port": int64(6443)}}}}, metav1.CreateOptions{}))

	dir := filepath.Join(t.TempDir(), "debug")
	idx, err := Run(ctx, dir, Options{Config: cfg, Run: fakeContainers(t), Containers: ofSlotB, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if s := read(t, dir, "kube/pods.txt"); !strings.Contains(s, "web") {
		t.Errorf("pods.txt:\n%s", s)
	}
	if s := read(t, dir, "kube/describe-pods.txt"); !strings.Contains(s, "Name:       web") || !strings.Contains(s, "DB_PASSWORD (from secret db)") ||
		!strings.Contains(s, "Back-off pulling image") {
		t.Errorf("describe-pods.txt:\n%s", s)
	}
	if s := read(t, dir, "kube/events.txt"); !strings.Contains(s, "app/pod/web") {
		t.Errorf("events.txt:\n%s", s)
	}
	read(t, dir, "kube/nodes.txt")
	if s := read(t, dir, "kube/capi/clusters.cluster.x-k8s.io.yaml"); !strings.Contains(s, "name: airgap-wl-b") {
		t.Errorf("Cluster API objects:\n%s", s)
	}
	// No kubelet behind envtest: the failing pod's log is there, empty.
	read(t, dir, "kube/logs/app_web_main.log")
	if s := read(t, dir, "docker/ps.txt"); !strings.Contains(s, "airgap-mgmt-a-control-plane") {
		t.Errorf("docker ps -a:\n%s", s)
	}
	if s := read(t, dir, "docker/logs/airgap-mgmt-b-control-plane.log"); !strings.Contains(s, "fake container airgap-mgmt-b-control-plane") {
		t.Errorf("logs of the slot's node:\n%s", s)
	}
	read(t, dir, "docker/logs/krops-registry-airgap-b.log")
	if _, err := os.Stat(filepath.Join(dir, "docker/logs/airgap-mgmt-a-control-plane.log")); err == nil {
		t.Error("captured the logs of another slot's container")
	}
	read(t, dir, IndexFile)
	if len(idx.Items) < 8 {
		t.Errorf("index: %+v", idx.Items)
	}
	// The Secret's value, plain or base64, is nowhere in the capture.
	b64 := base64.StdEncoding.EncodeToString([]byte(secretValue))
	err = filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if strings.Contains(string(b), secretValue) || strings.Contains(string(b), b64) {
			t.Errorf("%s holds the Secret's value", p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// With the API server down every API item records the error (the first
// one tried, the rest as skipped at once), and Docker is still captured.
func TestCaptureAPIServerDown(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "debug")
	start := time.Now()
	idx, err := Run(context.Background(), dir, Options{Config: &rest.Config{Host: "https://127.0.0.1:1"}, Run: fakeContainers(t), Containers: ofSlotB, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Errorf("took %s", el)
	}
	if s := read(t, dir, "kube/nodes.txt"); !strings.Contains(s, "error:") || !strings.Contains(s, "127.0.0.1:1") {
		t.Errorf("nodes.txt:\n%s", s)
	}
	if s := read(t, dir, "kube/events.txt"); !strings.Contains(s, "skipped: the API server is unreachable") {
		t.Errorf("events.txt:\n%s", s)
	}
	if s := read(t, dir, "docker/logs/airgap-mgmt-b-control-plane.log"); !strings.Contains(s, "fake container") {
		t.Errorf("docker logs after the API failed:\n%s", s)
	}
	failed := 0
	for _, it := range idx.Items {
		if it.Error != "" {
			failed++
		}
	}
	if failed < 3 {
		t.Errorf("index records %d errors: %+v", failed, idx.Items)
	}
}

// Each item is capped: what is over MaxBytes is cut and said so.
func TestCaptureCap(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "debug")
	idx, err := Run(context.Background(), dir, Options{ConfigErr: os.ErrNotExist, Run: fakeContainers(t), Containers: ofSlotB, MaxBytes: 20})
	if err != nil {
		t.Fatal(err)
	}
	s := read(t, dir, "docker/ps.txt")
	if !strings.Contains(s, "[truncated at 20 bytes]") || len(s) > 20+len("\n[truncated at 20 bytes]\n") {
		t.Errorf("ps.txt (%d bytes):\n%s", len(s), s)
	}
	if s := read(t, dir, "kube/error.txt"); !strings.Contains(s, "file does not exist") {
		t.Errorf("error.txt:\n%s", s)
	}
	truncated := false
	for _, it := range idx.Items {
		truncated = truncated || (it.File == "docker/ps.txt" && it.Truncated && it.Bytes == 20)
	}
	if !truncated {
		t.Errorf("index: %+v", idx.Items)
	}
}
