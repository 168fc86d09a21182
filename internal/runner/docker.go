package runner

import (
	"context"
	"fmt"
	"strings"
)

// PublishedPort asks Docker (through r) which host port it published for
// port (e.g. "6443/tcp") of container, as `docker port` prints it
// (0.0.0.0:55001, [::]:55001): the address an operator's host reaches a
// container by, on Linux and on a macOS host alike (Docker Desktop has no
// route to container addresses).
func PublishedPort(ctx context.Context, r Runner, container, port string) (string, error) {
	out, err := r.Run(ctx, "docker", "port", container, port)
	if err != nil {
		return "", fmt.Errorf("finding the host port of %s: %w", container, err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
		if i := strings.LastIndexByte(line, ':'); i >= 0 && i < len(line)-1 {
			return line[i+1:], nil
		}
	}
	return "", fmt.Errorf("docker published no host port for %s %s (output %q)", container, port, out)
}
