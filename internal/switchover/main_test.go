package switchover

import (
	"os"
	"testing"
	"time"

	"github.com/kubectl-bundle/kubectl-bundle/internal/pivot"
)

func TestMain(m *testing.M) {
	pivot.RequestTimeout = 2 * time.Minute // envtest on a loaded machine, not a site
	os.Exit(m.Run())
}
