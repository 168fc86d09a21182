package evidence

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"

	"github.com/kubectl-bundle/kubectl-bundle/internal/state"
)

// DefaultKeep is how many transactions' evidence retention keeps by default.
const DefaultKeep = 20

// Serving names, per slot, the package deployed in a slot that serves or
// may serve again (the active slot, and the previous one during a soak).
type Serving map[string]string

// MadeBy returns the ids of the transactions whose evidence shows they
// deployed what serves: for each slot, the newest transaction that
// deployed its package into it.
func MadeBy(d *state.Dir, serving Serving) map[string]bool {
	ids, _ := List(d)
	made := map[string]bool{}
	for slotName, digest := range serving {
		for i := len(ids) - 1; i >= 0; i-- {
			if deployed(d, ids[i], slotName, digest) {
				made[ids[i]] = true
				break
			}
		}
	}
	return made
}

func deployed(d *state.Dir, id, slotName, digest string) bool {
	f, err := os.Open(filepath.Join(Path(d, id), DeployedFile))
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var dep Deployed
		if json.Unmarshal(sc.Bytes(), &dep) == nil && dep.Slot == slotName && dep.Digest == digest {
			return true
		}
	}
	return false
}

// Prune removes the evidence of all but the newest keep transactions,
// never that of a protected id (the open transaction, those that made the
// active or previous slot). It returns the ids removed.
func Prune(d *state.Dir, keep int, protected map[string]bool) ([]string, error) {
	if keep <= 0 {
		return nil, nil
	}
	ids, err := List(d)
	if err != nil {
		return nil, err
	}
	var removed []string
	for i := 0; i < len(ids)-keep; i++ {
		if protected[ids[i]] {
			continue
		}
		if err := os.RemoveAll(Path(d, ids[i])); err != nil {
			return removed, err
		}
		removed = append(removed, ids[i])
	}
	return removed, nil
}
