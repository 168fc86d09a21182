package model_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The model's random draws run in worker processes beside the test's own
// (each a machine of its own: the model moves the working directory and
// sets the environment, so two machines cannot share a process): on a
// machine with N cores, N workers draw about N times the operations in
// the same budget when the cores are free (on a machine loaded by other
// tests two workers drew 5% more than one for 45% more CPU time: make
// test, which runs the packages side by side, keeps the default of 1;
// make fuzz takes every core). KB_MODEL_WORKERS sets their number
// (1 to 64; 1: the test alone); worker i draws from
// the seed workerSeed(seed, i), which its report names with
// KB_MODEL_WORKERS=1 to reproduce it alone.
const (
	envWorker  = "KB_MODEL_WORKER"
	maxWorkers = 4
	// workerLine starts the line a worker ends with: its counters.
	workerLine = "KB-MODEL-WORKER "
)

// workerCount is the number of workers KB_MODEL_WORKERS asks for, this
// test included; 1 inside a worker.
func workerCount() (int, error) {
	if os.Getenv(envWorker) != "" {
		return 1, nil
	}
	n := 1
	if s := os.Getenv("KB_MODEL_WORKERS"); s == "max" {
		n = min(runtime.GOMAXPROCS(0), maxWorkers)
	} else if s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 || v > 64 {
			return 0, fmt.Errorf("KB_MODEL_WORKERS=%q: want a number of processes from 1 to 64, or max (one a core, at most %d)", s, maxWorkers)
		}
		n = v
	}
	return n, nil
}

// workerSeed is worker i's seed, drawn from the run's: distinct for each
// worker, the same for the same run seed.
func workerSeed(seed uint64, i int) uint64 {
	if i == 0 {
		return seed
	}
	return seed ^ (uint64(i) * 0x9e3779b97f4a7c15)
}

// workerStats is what a worker reports when it ends.
type workerStats struct {
	Worker  int    `json:"worker"`
	Seed    uint64 `json:"seed"`
	Seqs    int    `json:"seqs"`
	Ops     int    `json:"ops"`
	Calls   int    `json:"calls"`
	Damages int    `json:"damages"`
	Repairs int    `json:"repairs"`
	Nexts   int    `json:"nexts"`
	Scripts int    `json:"scripts"`
	Kills   int    `json:"kills"`
	Found   bool   `json:"found"`
}

// worker is one started worker process.
type worker struct {
	i    int
	seed uint64
	cmd  *exec.Cmd
	out  bytes.Buffer
	err  error
	done chan struct{}
}

// startWorkers starts workers 1..n-1, each drawing ops operations at most
// within budget; the caller draws its own share as worker 0.
func startWorkers(t *testing.T, n int, seed uint64, ops int, budget time.Duration) []*worker {
	if os.Getenv(envWorker) != "" && os.Getenv("KB_MODEL_TEST_WORKER_FAILS") == "1" {
		t.Fatal("model worker: failing as KB_MODEL_TEST_WORKER_FAILS=1 asks (TestModelWorkers)")
	}
	var ws []*worker
	for i := 1; i < n; i++ {
		w := &worker{i: i, seed: workerSeed(seed, i), done: make(chan struct{})}
		ctx, cancel := context.WithTimeout(context.Background(), budget+2*time.Minute)
		w.cmd = exec.CommandContext(ctx, os.Args[0], "-test.run=^TestModel$", "-test.v", "-test.count=1", "-test.timeout=0")
		w.cmd.Env = append(os.Environ(),
			envWorker+"="+strconv.Itoa(i),
			"KB_MODEL_SEED="+strconv.FormatUint(w.seed, 10),
			"KB_MODEL_REPLAY=0",
			"KB_MODEL_OPS="+strconv.Itoa(ops),
			"KB_MODEL_BUDGET="+budget.String())
		w.cmd.Stdout, w.cmd.Stderr = &w.out, &w.out
		// A worker killed at its deadline whose children still hold the
		// output pipe does not hang the collection.
		w.cmd.WaitDelay = 10 * time.Second
		if err := w.cmd.Start(); err != nil {
			cancel()
			t.Fatalf("starting model worker %d: %v", i, err)
		}
		go func() {
			defer cancel()
			w.err = w.cmd.Wait()
			close(w.done)
		}()
		ws = append(ws, w)
	}
	return ws
}

// collect waits for the workers, adds their counters to total and reports
// what they found: a worker that failed fails the test with its output; a
// violation a worker reported (report mode) is logged with it.
func collect(t *testing.T, ws []*worker, total *workerStats) {
	for _, w := range ws {
		<-w.done
		var st *workerStats
		sc := bufio.NewScanner(bytes.NewReader(w.out.Bytes()))
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() {
			if _, rest, ok := strings.Cut(sc.Text(), workerLine); ok {
				st = &workerStats{}
				if err := json.Unmarshal([]byte(rest), st); err != nil {
					t.Errorf("model worker %d: its counters do not parse: %v", w.i, err)
				}
			}
		}
		out := w.out.String()
		switch {
		case w.err != nil:
			t.Errorf("model worker %d (seed %d; alone: KB_MODEL_WORKERS=1 KB_MODEL_SEED=%d) failed: %v\n%s", w.i, w.seed, w.seed, w.err, out)
		case st == nil:
			t.Errorf("model worker %d (seed %d) ended without its counters:\n%s", w.i, w.seed, out)
		case st.Found:
			t.Logf("model worker %d (seed %d; alone: KB_MODEL_WORKERS=1 KB_MODEL_SEED=%d) reported:\n%s", w.i, w.seed, w.seed, out)
		}
		if st != nil {
			total.Seqs += st.Seqs
			total.Ops += st.Ops
			total.Calls += st.Calls
			total.Damages += st.Damages
			total.Repairs += st.Repairs
			total.Nexts += st.Nexts
			total.Scripts += st.Scripts
			total.Kills += st.Kills
		}
	}
}

// TestModelWorkers runs TestModel with two workers: the counters it
// reports add the worker's to its own, and a worker that fails fails it
// with the worker's output.
func TestModelWorkers(t *testing.T) {
	if testing.Short() {
		t.Skip("runs TestModel twice")
	}
	run := func(extra ...string) (string, error) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestModel$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), append([]string{"KB_MODEL_WORKERS=2", "KB_MODEL_OPS=40", "KB_MODEL_REPLAY=0", "KB_MODEL_SEED=3", "KB_MODEL_BUDGET=60s"}, extra...)...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run()
	if err != nil {
		t.Fatalf("TestModel with two workers: %v\n%s", err, out)
	}
	var own, total int
	for _, line := range strings.Split(out, "\n") {
		if _, rest, ok := strings.Cut(line, "this process: "); ok {
			fmt.Sscanf(rest, "%d sequences, %d operations", new(int), &own)
		}
		if _, rest, ok := strings.Cut(line, "TestModel: "); ok {
			fmt.Sscanf(rest, "%d sequences, %d operations", new(int), &total)
		}
	}
	if !strings.Contains(out, "2 worker processes") || own == 0 || total <= own {
		t.Fatalf("two workers: this process drew %d operations, the total says %d; want the worker's added:\n%s", own, total, out)
	}
	out, err = run("KB_MODEL_TEST_WORKER_FAILS=1")
	if err == nil || !strings.Contains(out, "model worker 1 (seed") || !strings.Contains(out, "failing as KB_MODEL_TEST_WORKER_FAILS=1 asks") {
		t.Fatalf("a failing worker: err %v; want the test failed with the worker's output:\n%s", err, out)
	}
}
