package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// pinnedEnv carries the CPU plan across the harness's re-exec under taskset:
// "SUT,SIDE" (CPU numbers).
const pinnedEnv = "SCOOTGATE_LOAD_CPUS"

// pinning says where processes run. With taskset empty nothing is pinned.
type pinning struct {
	taskset string
	sut     int // the system under test (node or baseline)
	side    int // the upstream process and the generator
}

func (p pinning) on() bool { return p.taskset != "" }

func (p pinning) String() string {
	if !p.on() {
		return "not pinned (taskset missing, fewer than 2 CPUs, or -pin=false)"
	}
	return fmt.Sprintf("system under test on CPU %d; fake provider with MQTT broker, egress proxy and load generator (three processes) on CPU %d", p.sut, p.side)
}

// planPinning picks the first two CPUs this process may run on.
func planPinning(want bool) pinning {
	if !want {
		return pinning{}
	}
	path, err := exec.LookPath("taskset")
	if err != nil {
		return pinning{}
	}
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return pinning{}
	}
	cpus := allowedCPUs(string(data))
	if len(cpus) < 2 {
		return pinning{}
	}
	return pinning{taskset: path, sut: cpus[0], side: cpus[1]}
}

// allowedCPUs parses "Cpus_allowed_list:\t0-1,4" from /proc/self/status.
func allowedCPUs(status string) []int {
	for line := range strings.Lines(status) {
		rest, ok := strings.CutPrefix(line, "Cpus_allowed_list:")
		if !ok {
			continue
		}
		var cpus []int
		for part := range strings.SplitSeq(strings.TrimSpace(rest), ",") {
			lo, hi, isRange := strings.Cut(part, "-")
			a, err1 := strconv.Atoi(lo)
			b := a
			var err2 error
			if isRange {
				b, err2 = strconv.Atoi(hi)
			}
			if err1 != nil || err2 != nil || b < a {
				return nil
			}
			for c := a; c <= b && len(cpus) < 64; c++ {
				cpus = append(cpus, c)
			}
		}
		return cpus
	}
	return nil
}

// pinSelf re-executes the harness under taskset on the side CPU of the
// plan for want; the environment marks the second start, which returns the
// plan. It returns without a re-exec when nothing can be pinned.
func pinSelf(want bool) (pinning, error) {
	if v, ok := os.LookupEnv(pinnedEnv); ok {
		sut, side, _ := strings.Cut(v, ",")
		a, err1 := strconv.Atoi(sut)
		b, err2 := strconv.Atoi(side)
		path, err3 := exec.LookPath("taskset")
		if err := errors.Join(err1, err2, err3); err != nil {
			return pinning{}, fmt.Errorf("%s=%q: %w", pinnedEnv, v, err)
		}
		return pinning{taskset: path, sut: a, side: b}, nil
	}
	p := planPinning(want)
	if !p.on() {
		return p, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return pinning{}, err
	}
	argv := append([]string{"taskset", "-c", strconv.Itoa(p.side), exe}, os.Args[1:]...)
	env := append(os.Environ(), fmt.Sprintf("%s=%d,%d", pinnedEnv, p.sut, p.side))
	return pinning{}, syscall.Exec(p.taskset, argv, env)
}

// child is a role process started by the harness.
type child struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	ready readyLine
	log   string        // its stderr
	done  chan struct{} // closed when it has exited
	err   error         // Wait's result, set before done closes
}

// childCommand is this executable with -role=role on cpu (-1: unpinned),
// with env added to the harness's environment (a later entry wins).
func childCommand(p pinning, cpu int, role string, args, env []string) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	argv := append([]string{exe, "-role=" + role}, args...)
	if p.on() && cpu >= 0 {
		argv = append([]string{p.taskset, "-c", strconv.Itoa(cpu)}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	return cmd, nil
}

// startChild starts cmd (from childCommand) as name, its stderr in logDir,
// and waits for its ready line.
func startChild(ctx context.Context, name string, cmd *exec.Cmd, logDir string) (*child, error) {
	c := &child{name: name, cmd: cmd, log: filepath.Join(logDir, name+".stderr"), done: make(chan struct{})}
	logFile, err := os.Create(c.log)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child holds its own descriptor
	c.cmd.Stderr = logFile
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	lines := make(chan string, 1)
	go func() {
		br := bufio.NewReader(stdout)
		line, _ := br.ReadString('\n')
		lines <- line
		_, _ = io.Copy(io.Discard, br) // until the child exits
	}()
	go func() {
		c.err = c.cmd.Wait()
		close(c.done)
	}()
	timer := time.NewTimer(30 * time.Second)
	defer timer.Stop()
	select {
	case line := <-lines:
		if err := json.Unmarshal([]byte(line), &c.ready); err != nil || c.ready.Control == "" {
			c.stop()
			return nil, fmt.Errorf("%s did not start: %s", name, c.tail())
		}
		return c, nil
	case <-timer.C:
	case <-ctx.Done():
	}
	c.stop()
	return nil, fmt.Errorf("%s: no ready line within 30s: %s", name, c.tail())
}

func (c *child) pid() int { return c.cmd.Process.Pid }

// stop closes the child's stdin (its signal to drain and exit), waits up
// to 10 s, then kills it by pid.
func (c *child) stop() {
	_ = c.stdin.Close()
	t := time.NewTimer(10 * time.Second)
	defer t.Stop()
	select {
	case <-c.done:
		return
	case <-t.C:
	}
	_ = c.cmd.Process.Kill()
	<-c.done
}

// tail returns the end of the child's stderr, for error messages.
func (c *child) tail() string {
	data, _ := os.ReadFile(c.log)
	if len(data) > 2000 {
		data = data[len(data)-2000:]
	}
	return strings.TrimSpace(string(data))
}

// stats reads the child's GET /stats into v.
func (c *child) stats(ctx context.Context, v any) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+c.ready.Control+"/stats", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s stats: %w", c.name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s stats: status %d", c.name, resp.StatusCode)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// saveHeap writes the child's heap profile to path.
func (c *child) saveHeap(ctx context.Context, path string) error {
	return c.saveProfile(ctx, "heap", path)
}

// saveProfile writes the child's /debug/pprof/<name> to path.
func (c *child) saveProfile(ctx context.Context, name, path string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+c.ready.Control+"/debug/pprof/"+name, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s profile: %w", c.name, name, err)
	}
	defer resp.Body.Close()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, resp.Body)
	return errors.Join(err, f.Close())
}

// alive reports whether the child still runs.
func (c *child) alive() error {
	select {
	case <-c.done:
		return errors.Join(fmt.Errorf("%s exited", c.name), c.err)
	default:
		return nil
	}
}
