package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// winready as the bench runs it: its binary as a process of its own, with
// the metrics it serves and the memory it holds.

// winready is the operator binary running against the bench's control plane.
type winready struct {
	cmd     *exec.Cmd
	metrics string
}

func startWinready(ctx context.Context, cfg config, kubeconfig string) (*winready, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	_ = l.Close()
	// Plain HTTP: the bench reads the metrics itself, as a local demo would.
	// Its control plane has none of winready's admission policies, which
	// the bench does not measure: winready runs without waiting for them.
	cmd := exec.CommandContext(ctx, cfg.winready, "--kubeconfig", kubeconfig, "--leader-elect=false",
		"--metrics-bind-address", addr, "--metrics-secure=false", "--health-probe-bind-address", "0", "--namespace", operatorNamespace,
		"--probe-image", "winready:bench", "--require-admission-policies=false")
	cmd.Stderr = io.Discard
	cmd.Stdout = io.Discard
	if cfg.winreadyLog != "" {
		f, err := os.OpenFile(cfg.winreadyLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, err
		}
		defer f.Close() // the child holds its own descriptor
		cmd.Stderr = f
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s (run make build): %w", cfg.winready, err)
	}
	op := &winready{cmd: cmd, metrics: "http://" + addr + "/metrics"}
	// Started means its caches have synced and its workers run, as for an
	// operator that was installed before the migration is asked for.
	for i := 0; ; i++ {
		if _, err := op.metric("controller_runtime_active_workers", `controller="windowsreadiness"`); err == nil {
			return op, nil
		}
		if i > 300 {
			op.stop()
			return nil, errors.New("winready's metrics endpoint did not come up")
		}
		time.Sleep(100 * time.Millisecond) // polling a process start-up
	}
}

func (w *winready) stop() {
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	_ = w.cmd.Wait()
}

// sample is one line of the metrics endpoint: its labels ("" or "{...}")
// and its value.
type sample struct {
	labels string
	value  float64
}

// samples reads the samples of metric name from winready's metrics endpoint.
func (w *winready) samples(name string) ([]sample, error) {
	resp, err := http.Get(w.metrics)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out []sample
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), name)
		if !ok || rest == "" || (rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		fields := strings.Fields(rest)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			continue
		}
		labels, _, _ := strings.Cut(rest, "}")
		out = append(out, sample{labels: labels, value: v})
	}
	return out, sc.Err()
}

// metric sums the samples of a metric whose labels contain match.
func (w *winready) metric(name, match string) (float64, error) {
	all, err := w.samples(name)
	if err != nil {
		return 0, err
	}
	sum, found := 0.0, false
	for _, smp := range all {
		if strings.Contains(smp.labels, match) {
			sum += smp.value
			found = true
		}
	}
	if !found {
		return 0, fmt.Errorf("no metric %s{%s}", name, match)
	}
	return sum, nil
}

// byLabel reads the samples of a metric by the value of one label.
func (w *winready) byLabel(name, label string) (map[string]float64, error) {
	all, err := w.samples(name)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, smp := range all {
		if strings.Contains(smp.labels, label+`="`) {
			out[labelOf(smp.labels, label)] += smp.value
		}
	}
	return out, nil
}

func rssMiB(pid int) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, err := strconv.ParseFloat(f[1], 64)
			return kb / 1024, err
		}
	}
	return 0, errors.New("no VmRSS")
}

// labelOf is the value of label in a sample's labels.
func labelOf(labels, label string) string {
	_, rest, _ := strings.Cut(labels, label+`="`)
	value, _, _ := strings.Cut(rest, `"`)
	return value
}
