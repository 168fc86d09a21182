package slot

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/kind/pkg/cluster"
	kindlog "sigs.k8s.io/kind/pkg/log"
	"sigs.k8s.io/yaml"
)

// ClusterProvider creates and deletes kind clusters. The real one is the
// kind library on Docker; tests register an in-process fake with the same
// contract.
type ClusterProvider interface {
	// Create creates cluster name from cfg and writes its context
	// (kind-<name>) into kubeconfig ("" : kubectl's default file).
	Create(ctx context.Context, name string, cfg *v1alpha4.Cluster, kubeconfig string) error
	// Delete deletes the cluster and its kubeconfig entries; deleting a
	// cluster that does not exist is not an error.
	Delete(ctx context.Context, name, kubeconfig string) error
	// Exists reports whether the cluster exists.
	Exists(ctx context.Context, name string) (bool, error)
}

// KubeletCgroupV1 is the kubeadm patch every kind cluster of ours carries:
// since Kubernetes v1.35 the kubelet refuses to start on a cgroup v1 host
// unless failCgroupV1 is false. Docker Desktop on macOS (the krops site) and
// most current Linux hosts run cgroup v2, where the setting changes nothing;
// without it a cgroup v1 host's node never becomes Ready.
const KubeletCgroupV1 = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
`

// KindConfig is the management cluster of stage-and-create-cluster.sh: one
// control-plane node with the Docker socket mounted (CAPD drives the host's
// Docker through it), on the pinned node image, its containerd pulling
// images named after the slot's registry on the host (127.0.0.1:<port>, where
// zarf pushes them) from that registry's container on the kind network.
func KindConfig(c *Config, n *Names) *v1alpha4.Cluster {
	cfg := &v1alpha4.Cluster{
		TypeMeta: v1alpha4.TypeMeta{Kind: "Cluster", APIVersion: "kind.x-k8s.io/v1alpha4"},
		Name:     n.Cluster,
		ContainerdConfigPatches: []string{fmt.Sprintf(`[plugins."io.containerd.grpc.v1.cri".registry.mirrors."127.0.0.1:%d"]
  endpoint = ["http://%s:5000"]
`, n.RegistryPort, n.Registry)},
		KubeadmConfigPatches: []string{KubeletCgroupV1},
		Nodes: []v1alpha4.Node{{
			Role:  v1alpha4.ControlPlaneRole,
			Image: imageName(c.NodeImage),
			ExtraMounts: []v1alpha4.Mount{{
				HostPath:      c.DockerSocket,
				ContainerPath: "/var/run/docker.sock",
			}},
		}},
	}
	return cfg
}

// KindConfigYAML renders cfg as kind reads it (the golden test's form).
func KindConfigYAML(cfg *v1alpha4.Cluster) ([]byte, error) {
	return yaml.Marshal(cfg)
}

// KindLibrary is the real ClusterProvider: sigs.k8s.io/kind on Docker.
type KindLibrary struct {
	Log io.Writer // kind's status lines
}

func (k KindLibrary) provider() *cluster.Provider {
	return cluster.NewProvider(cluster.ProviderWithDocker(), cluster.ProviderWithLogger(&kindLogger{w: k.Log}))
}

// Create implements ClusterProvider.
func (k KindLibrary) Create(_ context.Context, name string, cfg *v1alpha4.Cluster, kubeconfig string) error {
	private, err := os.MkdirTemp("", "kubectl-bundle-kind-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(private)
	err = k.provider().Create(name,
		cluster.CreateWithV1Alpha4Config(cfg),
		cluster.CreateWithKubeconfigPath(filepath.Join(private, "kubeconfig")),
		cluster.CreateWithWaitForReady(3*time.Minute),
		cluster.CreateWithDisplayUsage(false),
		cluster.CreateWithDisplaySalutation(false))
	if err != nil {
		return fmt.Errorf("kind create cluster %s: %w", name, err)
	}
	// See kind_kubeconfig.go: the shared file is replaced atomically.
	return mergeKindEntries(kubeconfigTarget(kubeconfig), filepath.Join(private, "kubeconfig"), name)
}

// Delete implements ClusterProvider.
func (k KindLibrary) Delete(_ context.Context, name, kubeconfig string) error {
	private, err := os.MkdirTemp("", "kubectl-bundle-kind-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(private)
	if err := k.provider().Delete(name, filepath.Join(private, "kubeconfig")); err != nil {
		return fmt.Errorf("kind delete cluster %s: %w", name, err)
	}
	return removeKindEntries(kubeconfigTarget(kubeconfig), name)
}

// Exists implements ClusterProvider.
func (k KindLibrary) Exists(_ context.Context, name string) (bool, error) {
	names, err := k.provider().List()
	if err != nil {
		return false, fmt.Errorf("listing kind clusters: %w", err)
	}
	return slices.Contains(names, name), nil
}

// kindLogger forwards kind's status to a writer.
type kindLogger struct{ w io.Writer }

func (l *kindLogger) out() io.Writer {
	if l.w == nil {
		return io.Discard
	}
	return l.w
}
func (l *kindLogger) Warn(m string)                         { fmt.Fprintln(l.out(), "kind: warning:", m) }
func (l *kindLogger) Warnf(f string, a ...any)              { l.Warn(fmt.Sprintf(f, a...)) }
func (l *kindLogger) Error(m string)                        { fmt.Fprintln(l.out(), "kind: error:", m) }
func (l *kindLogger) Errorf(f string, a ...any)             { l.Error(fmt.Sprintf(f, a...)) }
func (l *kindLogger) V(lv kindlog.Level) kindlog.InfoLogger { return &kindInfo{l: l, on: lv <= 0} }

type kindInfo struct {
	l  *kindLogger
	on bool
}

func (i *kindInfo) Info(m string) {
	if i.on {
		fmt.Fprintln(i.l.out(), "kind:", m)
	}
}
func (i *kindInfo) Infof(f string, a ...any) { i.Info(fmt.Sprintf(f, a...)) }
func (i *kindInfo) Enabled() bool            { return i.on }
