package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/evalmeter/evalmeter/internal/ledger"
)

// replicaPhase loads n `evalmeter api` processes, GOMAXPROCS=1 each, on one
// PostgreSQL, spreading requests over them as a Service does. It returns
// the phase with the replicas' and PostgreSQL's CPU time.
func replicaPhase(ctx context.Context, bin, dbURL, pgData string, store *ledger.Store, n int,
	duration time.Duration, concurrency int, body []byte) (result, error) {
	secret := make([]byte, 32)
	rand.Read(secret)
	var (
		urls  []string
		procs []*exec.Cmd
	)
	defer func() {
		for _, p := range procs {
			p.Process.Kill()
			p.Wait()
		}
	}()
	for i := range n {
		addr, err := freeAddr()
		if err != nil {
			return result{}, err
		}
		opsAddr, err := freeAddr()
		if err != nil {
			return result{}, err
		}
		cmd := exec.Command(bin, "api", "--addr", addr, "--ops-addr", opsAddr)
		cmd.Env = append(os.Environ(),
			"GOMAXPROCS=1",
			"DATABASE_URL="+dbURL,
			"EVALMETER_TOKEN_SECRET="+base64.StdEncoding.EncodeToString(secret),
			"EVALMETER_DB_MAX_CONNS="+strconv.Itoa(maxConnsFlag))
		// Logs as in production, one line per request, to where no one reads.
		devNull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
		if err != nil {
			return result{}, err
		}
		defer devNull.Close()
		cmd.Stdout, cmd.Stderr = devNull, devNull
		if err := cmd.Start(); err != nil {
			return result{}, fmt.Errorf("replica %d: %w", i, err)
		}
		procs = append(procs, cmd)
		if err := awaitReady("http://"+opsAddr+"/readyz", 30*time.Second); err != nil {
			return result{}, fmt.Errorf("replica %d: %w", i, err)
		}
		urls = append(urls, "http://"+addr)
	}

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: concurrency}, Timeout: 30 * time.Second}
	key, err := grant(ctx, store, fmt.Sprintf("load-replicas-%d", n), 1)
	if err != nil {
		return result{}, err
	}
	token, err := openSession(client, urls[0], key, fmt.Sprintf("load-replicas-session-%d", n))
	if err != nil {
		return result{}, err
	}
	cpu := func() time.Duration {
		var sum time.Duration
		for _, p := range procs {
			sum += processCPU(p.Process.Pid, false)
		}
		return sum
	}
	return load(duration, concurrency, cpu, pgCPU(pgData), func(worker, i int) (int, error) {
		url := urls[(worker+i)%len(urls)] + "/api/svc/v1/metrics"
		return post(client, url, token, fmt.Sprintf("replicas-%d-%03d-%09d", n, worker, i), body)
	}), nil
}

// buildEvalmeter builds the evalmeter binary into dir.
func buildEvalmeter(dir string) (string, error) {
	bin := filepath.Join(dir, "evalmeter")
	out, err := exec.Command("go", "build", "-o", bin, "./cmd/evalmeter").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build ./cmd/evalmeter: %v\n%s", err, out)
	}
	return bin, nil
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func awaitReady(url string, bound time.Duration) error {
	deadline := time.Now().Add(bound)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready within %s: %v", url, bound, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// pgCPU returns a function that reads the CPU time of the PostgreSQL whose
// data directory is pgData: its postmaster and every backend.
func pgCPU(pgData string) func() time.Duration {
	return func() time.Duration {
		b, err := os.ReadFile(filepath.Join(pgData, "postmaster.pid"))
		if err != nil {
			return 0
		}
		pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
		if err != nil {
			return 0
		}
		return processCPU(pid, true)
	}
}

// processCPU is the user and system CPU time of pid, and with children of
// the processes whose parent it is (their own, not their children's), from
// /proc. Backends that exit during a phase are not counted: the pools keep
// their connections open.
func processCPU(pid int, children bool) time.Duration {
	const ticksPerSecond = 100 // USER_HZ on Linux
	ticks := func(stat string) (ppid, used int64, ok bool) {
		// The command, in parentheses, may hold spaces: fields start after it.
		i := strings.LastIndexByte(stat, ')')
		if i < 0 {
			return 0, 0, false
		}
		f := strings.Fields(stat[i+1:]) // f[0] is field 3, the state
		if len(f) < 13 {
			return 0, 0, false
		}
		ppid, _ = strconv.ParseInt(f[1], 10, 64)
		utime, _ := strconv.ParseInt(f[11], 10, 64)
		stime, _ := strconv.ParseInt(f[12], 10, 64)
		return ppid, utime + stime, true
	}
	var total int64
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		if _, used, ok := ticks(string(b)); ok {
			total += used
		}
	}
	if children {
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			if _, err := strconv.Atoi(e.Name()); err != nil {
				continue
			}
			b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
			if err != nil {
				continue
			}
			if ppid, used, ok := ticks(string(b)); ok && ppid == int64(pid) {
				total += used
			}
		}
	}
	return time.Duration(total) * time.Second / ticksPerSecond
}

// enoughCores reports whether n replicas at GOMAXPROCS=1 each get a core,
// with one more left for PostgreSQL and the load.
func enoughCores(n int) bool { return runtime.NumCPU() >= n+1 }
