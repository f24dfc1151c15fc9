// Command runc-nosysres is an OCI runtime wrapper for Docker engines on hosts
// whose capability bounding set lacks CAP_SYS_RESOURCE (as on the machines this
// project is built on). There, `docker run --privileged` (which kind always
// uses) fails with "unable to apply caps: operation not permitted", because
// runc is asked to grant a capability the host cannot give.
//
// The wrapper removes CAP_SYS_RESOURCE from every capability set of
//
//   - the bundle's config.json, for `create` and `run` (--bundle/-b, default
//     the current directory), and
//   - the process file, for `exec` (--process/-p),
//
// then replaces itself with the real runc (env EVALMETER_RUNC, else runc in
// PATH) with the original arguments. Register it with dockerd:
//
//	dockerd --add-runtime evalmeter-runc=/abs/path/runc-nosysres --default-runtime evalmeter-runc
//
// hack/offline/docker.sh does that.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// dropCap is the capability this host cannot grant.
const dropCap = "CAP_SYS_RESOURCE"

// capSets are the capability sets of the OCI runtime spec (process.capabilities).
var capSets = []string{"bounding", "effective", "inheritable", "permitted", "ambient"}

func main() {
	args := os.Args[1:]
	for _, t := range targets(args) {
		if err := rewriteFile(t.path, t.inProcess); err != nil {
			fmt.Fprintf(os.Stderr, "runc-nosysres: %v\n", err)
			os.Exit(1)
		}
	}
	runc, err := realRunc()
	if err != nil {
		fmt.Fprintf(os.Stderr, "runc-nosysres: %v\n", err)
		os.Exit(1)
	}
	err = syscall.Exec(runc, append([]string{runc}, args...), os.Environ())
	fmt.Fprintf(os.Stderr, "runc-nosysres: exec %s: %v\n", runc, err)
	os.Exit(1)
}

// target is a JSON file to rewrite: a bundle's config.json (capabilities under
// "process") or an exec process file (capabilities at the top level).
type target struct {
	path      string
	inProcess bool
}

// globalValueFlags are runc's global flags that take a separate value; they
// come before the command and must be skipped to find it.
var globalValueFlags = map[string]bool{"--root": true, "--log": true, "--log-format": true, "--criu": true, "--rootless": true}

// targets finds the files to rewrite in runc's arguments:
// `runc [global flags] COMMAND [flags] [ID]`.
func targets(args []string) []target {
	i := 0
	for i < len(args) && strings.HasPrefix(args[i], "-") { // skip global flags
		if globalValueFlags[args[i]] {
			i++
		}
		i++
	}
	if i >= len(args) {
		return nil
	}
	cmd, rest := args[i], args[i+1:]
	switch cmd {
	case "create", "run":
		bundle, ok := flagValue(rest, "--bundle", "-b")
		if !ok {
			bundle = "." // runc's default: the current directory
		}
		return []target{{path: filepath.Join(bundle, "config.json"), inProcess: true}}
	case "exec":
		if p, ok := flagValue(rest, "--process", "-p"); ok {
			return []target{{path: p}}
		}
	}
	return nil
}

// flagValue returns the value of a flag given as `--long V`, `--long=V`,
// `-s V` or `-s=V` (single or double dash, as runc's flag parser accepts).
func flagValue(args []string, long, short string) (string, bool) {
	names := []string{long, short, "-" + long, strings.TrimPrefix(long, "-")}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		for _, n := range names {
			if a == n && i+1 < len(args) {
				return args[i+1], true
			}
			if v, ok := strings.CutPrefix(a, n+"="); ok {
				return v, true
			}
		}
	}
	return "", false
}

// rewriteFile removes dropCap from the file in place (atomically, keeping its
// mode). A missing file is left for runc to report.
func rewriteFile(path string, inProcess bool) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	out, changed, err := stripCap(data, inProcess)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if !changed {
		return nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	tmp := path + ".nosysres.tmp"
	if err := os.WriteFile(tmp, out, fi.Mode().Perm()); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// stripCap removes dropCap from every capability set of an OCI config
// (inProcess: under "process") or process document. Everything else is kept
// as it was: the other members are carried as raw JSON, so numbers, unknown
// fields and nulls pass through untouched. It reports whether it changed
// anything; an unchanged document is returned as given.
func stripCap(data []byte, inProcess bool) ([]byte, bool, error) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, false, err
	}
	proc := doc
	if inProcess {
		raw, ok := doc["process"]
		if !ok || isNull(raw) {
			return data, false, nil
		}
		proc = nil // a fresh map: Unmarshal would merge into doc
		if err := json.Unmarshal(raw, &proc); err != nil {
			return nil, false, fmt.Errorf("process: %w", err)
		}
	}
	raw, ok := proc["capabilities"]
	if !ok || isNull(raw) {
		return data, false, nil
	}
	var caps map[string]json.RawMessage
	if err := json.Unmarshal(raw, &caps); err != nil {
		return nil, false, fmt.Errorf("capabilities: %w", err)
	}
	changed := false
	var err error
	for _, set := range capSets {
		raw, ok := caps[set]
		if !ok || isNull(raw) {
			continue
		}
		var list []string
		if err := json.Unmarshal(raw, &list); err != nil {
			return nil, false, fmt.Errorf("capabilities.%s: %w", set, err)
		}
		kept := make([]string, 0, len(list))
		for _, c := range list {
			if c != dropCap {
				kept = append(kept, c)
			}
		}
		if len(kept) == len(list) {
			continue
		}
		changed = true
		if caps[set], err = marshal(kept); err != nil {
			return nil, false, err
		}
	}
	if !changed {
		return data, false, nil
	}
	if proc["capabilities"], err = marshal(caps); err != nil {
		return nil, false, err
	}
	if inProcess {
		if doc["process"], err = marshal(proc); err != nil {
			return nil, false, err
		}
	}
	out, err := marshal(doc)
	return out, true, err
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// marshal encodes v without escaping <, > and & (json.Marshal would).
func marshal(v any) (json.RawMessage, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// realRunc is EVALMETER_RUNC or runc in PATH, refusing this wrapper itself
// (which would loop forever).
func realRunc() (string, error) {
	p := os.Getenv("EVALMETER_RUNC")
	if p == "" {
		var err error
		if p, err = exec.LookPath("runc"); err != nil {
			return "", fmt.Errorf("no runc to run (set EVALMETER_RUNC): %w", err)
		}
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	if self, err := os.Executable(); err == nil && sameFile(self, abs) {
		return "", fmt.Errorf("%s is this wrapper, not runc (set EVALMETER_RUNC)", abs)
	}
	return abs, nil
}

func sameFile(a, b string) bool {
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(fa, fb)
}
