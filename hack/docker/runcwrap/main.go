// Command runcwrap is the OCI runtime hack/docker/ensure.sh registers with
// the Docker daemon it starts itself, and only where `docker run
// --privileged` fails: on a host whose capability bounding set lacks
// CAP_SYS_RESOURCE (some sandboxes and CI runners), runc cannot grant it and
// refuses every privileged container. runcwrap removes CAP_SYS_RESOURCE from
// the container's capability lists (the bundle's config.json on create and
// run, the --process file on exec) and then runs the real runc with the same
// arguments. Nothing else in the spec changes.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

const dropped = "CAP_SYS_RESOURCE"

func main() {
	real := os.Getenv("KB_REAL_RUNC")
	for _, p := range []string{"/usr/sbin/runc", "/usr/bin/runc", "/usr/local/sbin/runc", "/usr/local/bin/runc"} {
		if real != "" {
			break
		}
		if _, err := os.Stat(p); err == nil {
			real = p
		}
	}
	if err := rewrite(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "runcwrap:", err)
		os.Exit(1)
	}
	err := syscall.Exec(real, append([]string{real}, os.Args[1:]...), os.Environ())
	fmt.Fprintln(os.Stderr, "runcwrap: exec", real+":", err)
	os.Exit(1)
}

// rewrite finds the spec files the runc command line names and drops the
// capability from them.
func rewrite(args []string) error {
	cmd, bundle, process := "", "", ""
	for i := 0; i < len(args); i++ {
		a := args[i]
		value := func() string {
			if _, v, ok := strings.Cut(a, "="); ok {
				return v
			}
			if i+1 < len(args) {
				i++
				return args[i]
			}
			return ""
		}
		switch {
		case a == "--bundle" || a == "-b" || strings.HasPrefix(a, "--bundle="):
			bundle = value()
		case a == "--process" || a == "-p" || strings.HasPrefix(a, "--process="):
			process = value()
		case cmd == "" && !strings.HasPrefix(a, "-"):
			cmd = a
		case cmd == "" && globalWithValue(a):
			i++ // a global flag's value is not the command
		}
	}
	switch cmd {
	case "create", "run":
		if bundle == "" {
			bundle = "."
		}
		return dropFromFile(filepath.Join(bundle, "config.json"), true)
	case "exec":
		if process != "" {
			return dropFromFile(process, false)
		}
	}
	return nil
}

// globalWithValue: runc's global flags that take a separate value.
func globalWithValue(a string) bool {
	switch a {
	case "--root", "--log", "--log-format", "--criu", "--rootless":
		return true
	}
	return false
}

func dropFromFile(path string, isSpec bool) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	proc := doc
	if isSpec {
		p, ok := doc["process"].(map[string]any)
		if !ok {
			return nil
		}
		proc = p
	}
	caps, ok := proc["capabilities"].(map[string]any)
	if !ok {
		return nil
	}
	changed := false
	for k, v := range caps {
		list, ok := v.([]any)
		if !ok {
			continue
		}
		kept := list[:0:0]
		for _, c := range list {
			if c == dropped {
				changed = true
				continue
			}
			kept = append(kept, c)
		}
		caps[k] = kept
	}
	if !changed {
		return nil
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	info, err := os.Stat(path)
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, info.Mode().Perm())
}
