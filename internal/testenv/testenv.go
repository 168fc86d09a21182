// Package testenv starts a real Kubernetes API server (kube-apiserver and
// etcd from bin/testbin, built by make testbin) for tests, through
// controller-runtime's envtest. Outside CI a missing binary skips the test
// that asked for one; under CI=true it fails it.
package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/kubectl-bundle/kubectl-bundle/internal/checkout"
)

// Binaries are the programs envtest needs from the assets directory.
var Binaries = []string{"kube-apiserver", "etcd"}

// AssetsDir returns the directory holding the control-plane binaries:
// $KUBEBUILDER_ASSETS when set, else the repository's bin/testbin.
func AssetsDir() string {
	if d := os.Getenv("KUBEBUILDER_ASSETS"); d != "" {
		return d
	}
	return filepath.Join(RepoRoot(), "bin", "testbin")
}

// RepoRoot returns the repository's root: the nearest directory, from the
// working directory up, whose go.mod is the main module's (a test runs in
// its package's directory). A build with -trimpath (what make test uses,
// so that the tests and the release share one compile) leaves no absolute
// source path to start from; without one, this file's own path is used.
func RepoRoot() string {
	if dir, err := os.Getwd(); err == nil {
		if root := checkout.Around(dir); root != "" {
			return root
		}
	}
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Start starts an API server for the test and stops it when the test ends.
func Start(t testing.TB, crdDirs ...string) *rest.Config {
	t.Helper()
	requireBinaries(t)
	env, cfg, err := start(crdDirs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping the API server: %v", err)
		}
	})
	return cfg
}

// Missing returns an error naming the first control-plane binary that is
// not built, or nil.
func Missing() error {
	for _, b := range Binaries {
		if _, err := os.Stat(filepath.Join(AssetsDir(), b)); err != nil {
			return fmt.Errorf("%s not built (run make testbin): %w", b, err)
		}
	}
	return nil
}

// StartServer starts an API server outside a testing.T (testscript
// commands, demos); the caller must call stop.
func StartServer(crdDirs ...string) (cfg *rest.Config, stop func() error, err error) {
	env, cfg, err := start(crdDirs)
	if err != nil {
		return nil, nil, err
	}
	return cfg, env.Stop, nil
}

func requireBinaries(t testing.TB) {
	t.Helper()
	dir := AssetsDir()
	for _, b := range Binaries {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is required under CI=true: run make testbin (%v)", b, err)
			}
			t.Skipf("%s not built (run make testbin): %v", b, err)
		}
	}
}

func start(crdDirs []string) (*envtest.Environment, *rest.Config, error) {
	env := &envtest.Environment{
		BinaryAssetsDirectory: AssetsDir(),
		CRDDirectoryPaths:     crdDirs,
		ErrorIfCRDPathMissing: len(crdDirs) > 0,
		// envtest's 20 s is short on two loaded cores: kube-apiserver and
		// etcd then miss it, and the retries miss it too.
		ControlPlaneStartTimeout: 90 * time.Second,
		// Its 10 s for the CRDs to be served is short there too: CI
		// failed a script at "waiting for CRDs to appear as API resources".
		CRDInstallOptions: envtest.CRDInstallOptions{MaxTime: 90 * time.Second},
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, nil, fmt.Errorf("starting the API server from %s: %w", AssetsDir(), err)
	}
	return env, cfg, nil
}

// Shared is one API server shared by the tests of a package: started by
// the first test that asks, stopped by Stop (call it from TestMain).
type Shared struct {
	CRDDirs []string
	once    sync.Once
	env     *envtest.Environment
	cfg     *rest.Config
	err     error
}

// Config returns the shared server's config, starting it on first use.
func (s *Shared) Config(t testing.TB) *rest.Config {
	t.Helper()
	requireBinaries(t)
	s.once.Do(func() { s.env, s.cfg, s.err = start(s.CRDDirs) })
	if s.err != nil {
		t.Fatal(s.err)
	}
	return rest.CopyConfig(s.cfg)
}

// Stop stops the server if it was started.
func (s *Shared) Stop() {
	if s.env != nil {
		_ = s.env.Stop()
	}
}
