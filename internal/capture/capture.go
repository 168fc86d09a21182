// Package capture collects what an operator needs to see when a deploy or
// a gate fails: pods, their description and the logs of failing ones,
// events, nodes, Cluster API and CAPD objects and their controllers' logs,
// and the slot's Docker containers and their logs. Every capture has a
// timeout and a size cap, an unreachable API server is recorded and the
// rest goes on, and Secrets are never read.
package capture

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"k8s.io/client-go/rest"

	"github.com/kubectl-bundle/kubectl-bundle/internal/runner"
)

// Limits of one capture: each item (one listing, one container's logs)
// gets Timeout and writes at most MaxBytes; logs are the last TailLines
// lines; at most MaxPods failing pods and MaxContainers containers are
// captured.
const (
	DefaultTimeout  = 20 * time.Second
	DefaultMaxBytes = 1 << 20
	TailLines       = 500
	MaxPods         = 20
	MaxContainers   = 30
)

// IndexFile lists every item of a capture with its outcome.
const IndexFile = "index.json"

// Options say what to capture.
type Options struct {
	// Config reaches the slot's API server; nil (with ConfigErr) when it
	// cannot be built, which is recorded.
	Config    *rest.Config
	ConfigErr error
	// Run runs docker (the slot code's runner).
	Run runner.Runner
	// Containers says whether a Docker container belongs to the slot.
	Containers func(name string) bool
	// Timeout and MaxBytes bound each item (defaults above).
	Timeout  time.Duration
	MaxBytes int64
}

// Item is one capture's outcome.
type Item struct {
	Name      string  `json:"name"`
	File      string  `json:"file"`
	Bytes     int64   `json:"bytes"`
	Truncated bool    `json:"truncated,omitempty"`
	Seconds   float64 `json:"seconds"`
	Error     string  `json:"error,omitempty"`
}

// Index is index.json.
type Index struct {
	Started  time.Time `json:"started"`
	Timeout  string    `json:"timeoutPerItem"`
	MaxBytes int64     `json:"maxBytesPerItem"`
	Items    []Item    `json:"items"`
}

type capturer struct {
	ctx context.Context
	dir string
	o   Options
	idx *Index
	// apiDown is the first error that says the API server is unreachable:
	// the remaining API captures are recorded as skipped, not waited for.
	apiDown error
}

// Run captures into dir (created) and returns the index it wrote there.
func Run(ctx context.Context, dir string, o Options) (*Index, error) {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating the debug capture %s: %w", dir, err)
	}
	c := &capturer{ctx: ctx, dir: dir, o: o, idx: &Index{Started: time.Now().UTC(), Timeout: o.Timeout.String(), MaxBytes: o.MaxBytes}}
	c.kube()
	c.docker()
	b, err := json.MarshalIndent(c.idx, "", "  ")
	if err != nil {
		return c.idx, err
	}
	return c.idx, os.WriteFile(filepath.Join(dir, IndexFile), append(b, '\n'), 0o600)
}

// item runs fn with the item's timeout, writing what it writes, capped,
// into file, and records the outcome (an error is written into the file too).
func (c *capturer) item(name, file string, fn func(ctx context.Context, w io.Writer) error) error {
	start := time.Now()
	p := filepath.Join(c.dir, file)
	it := Item{Name: name, File: file}
	var err error
	if mk := os.MkdirAll(filepath.Dir(p), 0o700); mk != nil {
		err = mk
	} else if f, ferr := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600); ferr != nil {
		err = ferr
	} else {
		w := &capped{w: f, left: c.o.MaxBytes}
		ctx, cancel := context.WithTimeout(c.ctx, c.o.Timeout)
		err = fn(ctx, w)
		if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("stopped at its timeout (%s): %w", c.o.Timeout, err)
		}
		cancel()
		if w.cut {
			fmt.Fprintf(f, "\n[truncated at %d bytes]\n", c.o.MaxBytes)
		}
		if err != nil {
			// The error is written whole, past the cap: it says why the
			// capture is short.
			fmt.Fprintf(f, "\nerror: %v\n", err)
		}
		it.Bytes, it.Truncated = c.o.MaxBytes-w.left, w.cut
		f.Close()
	}
	it.Seconds = time.Since(start).Seconds()
	if err != nil {
		it.Error = err.Error()
	}
	c.idx.Items = append(c.idx.Items, it)
	return err
}

// capped writes at most left bytes to w, then drops the rest.
type capped struct {
	w    io.Writer
	left int64
	cut  bool
}

func (c *capped) Write(p []byte) (int, error) {
	n := len(p)
	if int64(len(p)) > c.left {
		p = p[:c.left]
		c.cut = true
	}
	if len(p) > 0 {
		if _, err := c.w.Write(p); err != nil {
			return 0, err
		}
		c.left -= int64(len(p))
	}
	return n, nil
}

// docker captures docker ps -a and the logs of the slot's containers.
func (c *capturer) docker() {
	if c.o.Run == nil {
		return
	}
	_ = c.item("docker ps -a", "docker/ps.txt", func(ctx context.Context, w io.Writer) error {
		out, err := c.o.Run.Run(ctx, "docker", "ps", "-a")
		w.Write(out)
		return err
	})
	var names []string
	_ = c.item("the slot's containers", "docker/containers.txt", func(ctx context.Context, w io.Writer) error {
		out, err := c.o.Run.Run(ctx, "docker", "ps", "-a", "--format", "{{.Names}}\t{{.Ports}}")
		if err != nil {
			return err
		}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			name, _, _ := strings.Cut(line, "\t")
			if name != "" && c.o.Containers != nil && c.o.Containers(name) {
				names = append(names, name)
				fmt.Fprintln(w, name)
			}
		}
		return nil
	})
	sort.Strings(names)
	for i, name := range names {
		if i >= MaxContainers {
			c.idx.Items = append(c.idx.Items, Item{Name: "docker logs", Error: fmt.Sprintf("%d more containers not captured (at most %d)", len(names)-i, MaxContainers)})
			break
		}
		_ = c.item("docker logs "+name, "docker/logs/"+name+".log", func(ctx context.Context, w io.Writer) error {
			out, err := logsOf(ctx, c.o.Run, name)
			w.Write(out)
			return err
		})
	}
}

// logsOf runs docker logs: a container's stderr is part of its log, so a
// runner that can hand it over does.
func logsOf(ctx context.Context, r runner.Runner, name string) ([]byte, error) {
	args := []string{"logs", "--tail", fmt.Sprint(TailLines), name}
	if ex, ok := r.(runner.Exec); ok {
		var stderr strings.Builder
		ex.Stderr = &stderr
		out, err := ex.Run(ctx, "docker", args...)
		if stderr.Len() > 0 {
			out = append(append(out, "\n----- stderr -----\n"...), stderr.String()...)
		}
		return out, err
	}
	return r.Run(ctx, "docker", args...)
}
