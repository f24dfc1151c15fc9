package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// decode parses JSON keeping numbers exact, to compare documents by meaning.
func decode(t *testing.T, data []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("decode %s: %v", data, err)
	}
	return v
}

func TestStripCap(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		inProcess bool
		want      string // "" when unchanged (and the bytes must be the same)
		wantErr   bool
	}{{
		name:      "config: every set, other fields kept exactly",
		inProcess: true,
		in: `{"ociVersion":"1.0.2","process":{"user":{"uid":0,"gid":0},"args":["/sbin/init","<&>"],
			"capabilities":{"bounding":["CAP_CHOWN","CAP_SYS_RESOURCE","CAP_SYS_ADMIN"],"effective":["CAP_SYS_RESOURCE","CAP_KILL"],
			"inheritable":["CAP_SYS_RESOURCE"],"permitted":["CAP_KILL","CAP_SYS_RESOURCE"],"ambient":["CAP_SYS_RESOURCE"]},
			"rlimits":[{"type":"RLIMIT_NOFILE","hard":18446744073709551615,"soft":1048576}],"x-unknown":null},
			"linux":{"resources":{"memory":{"limit":-1}},"maskedPaths":[]},"annotations":{"a":"1.50"}}`,
		want: `{"ociVersion":"1.0.2","process":{"user":{"uid":0,"gid":0},"args":["/sbin/init","<&>"],
			"capabilities":{"bounding":["CAP_CHOWN","CAP_SYS_ADMIN"],"effective":["CAP_KILL"],
			"inheritable":[],"permitted":["CAP_KILL"],"ambient":[]},
			"rlimits":[{"type":"RLIMIT_NOFILE","hard":18446744073709551615,"soft":1048576}],"x-unknown":null},
			"linux":{"resources":{"memory":{"limit":-1}},"maskedPaths":[]},"annotations":{"a":"1.50"}}`,
	}, {
		name:      "config: repeated entries and absent or null sets",
		inProcess: true,
		in:        `{"process":{"capabilities":{"bounding":["CAP_SYS_RESOURCE","CAP_NET_RAW","CAP_SYS_RESOURCE"],"ambient":null}}}`,
		want:      `{"process":{"capabilities":{"bounding":["CAP_NET_RAW"],"ambient":null}}}`,
	}, {
		name: "exec process file: capabilities at the top level",
		in: `{"args":["sh"],"cwd":"/","terminal":false,"capabilities":{"bounding":["CAP_SYS_RESOURCE","CAP_AUDIT_WRITE"],
			"effective":["CAP_SYS_RESOURCE"],"permitted":["CAP_SYS_RESOURCE"]}}`,
		want: `{"args":["sh"],"cwd":"/","terminal":false,"capabilities":{"bounding":["CAP_AUDIT_WRITE"],
			"effective":[],"permitted":[]}}`,
	}, {
		name:      "config without CAP_SYS_RESOURCE is left byte for byte",
		inProcess: true,
		in:        `{ "process" : {"capabilities":{"bounding":["CAP_CHOWN"]}, "n": 1.0e3}}`,
	}, {
		name:      "a process file's layout in a config is not a config's",
		inProcess: true,
		in:        `{"capabilities":{"bounding":["CAP_SYS_RESOURCE"]}}`,
	}, {
		name: "a config's layout in a process file is not a process file's",
		in:   `{"process":{"capabilities":{"bounding":["CAP_SYS_RESOURCE"]}}}`,
	}, {
		name:      "no process",
		inProcess: true,
		in:        `{"ociVersion":"1.0.2","root":{"path":"rootfs"}}`,
	}, {
		name:      "null capabilities",
		inProcess: true,
		in:        `{"process":{"capabilities":null}}`,
	}, {
		name:      "other capability-like members are not sets",
		inProcess: true,
		in:        `{"process":{"capabilities":{"x-extra":["CAP_SYS_RESOURCE"]}}}`,
	}, {
		name:    "invalid JSON",
		in:      `{"capabilities":`,
		wantErr: true,
	}, {
		name:    "a set that is not a list of names",
		in:      `{"capabilities":{"bounding":"CAP_SYS_RESOURCE"}}`,
		wantErr: true,
	}, {
		name:      "process that is not an object",
		inProcess: true,
		in:        `{"process":[]}`,
		wantErr:   true,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, changed, err := stripCap([]byte(tt.in), tt.inProcess)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("no error; got %s", out)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.want == "" {
				if changed || string(out) != tt.in {
					t.Fatalf("changed=%v, got %s, want the input unchanged", changed, out)
				}
				return
			}
			if !changed {
				t.Error("changed = false, want true")
			}
			if bytes.Contains(out, []byte(dropCap)) {
				t.Errorf("%s still in %s", dropCap, out)
			}
			if got, want := decode(t, out), decode(t, []byte(tt.want)); !reflect.DeepEqual(got, want) {
				t.Errorf("got  %s\nwant %s", out, tt.want)
			}
			// The exact large integer and the unescaped text survive.
			for _, s := range []string{"18446744073709551615", "<&>"} {
				if bytes.Contains([]byte(tt.in), []byte(s)) && !bytes.Contains(out, []byte(s)) {
					t.Errorf("%q lost: %s", s, out)
				}
			}
		})
	}
}

func TestTargets(t *testing.T) {
	cfg := func(dir string) []target { return []target{{path: filepath.Join(dir, "config.json"), inProcess: true}} }
	tests := []struct {
		name string
		args []string
		want []target
	}{
		{"containerd's create", []string{"--root", "/run/runc/moby", "--log", "/b/log.json", "--log-format", "json", "create", "--bundle", "/b", "--pid-file", "/b/init.pid", "id"}, cfg("/b")},
		{"--bundle=", []string{"create", "--bundle=/b", "id"}, cfg("/b")},
		{"-b", []string{"--systemd-cgroup", "run", "-b", "/b", "id"}, cfg("/b")},
		{"-b=", []string{"run", "--detach", "-b=/b", "id"}, cfg("/b")},
		{"single-dash long flag", []string{"create", "-bundle", "/b", "id"}, cfg("/b")},
		{"default bundle is the current directory", []string{"--root=/r", "run", "id"}, cfg(".")},
		{"exec --process", []string{"--root", "/r", "exec", "--process", "/tmp/p.json", "--detach", "--pid-file", "/p", "id"}, []target{{path: "/tmp/p.json"}}},
		{"exec -p=", []string{"exec", "-p=/tmp/p.json", "id"}, []target{{path: "/tmp/p.json"}}},
		{"exec without a process file", []string{"exec", "-t", "id", "sh"}, nil},
		{"a global flag's value is not the command", []string{"--root", "run", "delete", "--bundle", "/b", "id"}, nil},
		{"start", []string{"--root", "/r", "start", "id"}, nil},
		{"flags after -- are the container's", []string{"exec", "id", "--", "--process", "/x"}, nil},
		{"no command", []string{"--version"}, nil},
		{"nothing", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := targets(tt.args); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("targets(%q) = %v, want %v", tt.args, got, tt.want)
			}
		})
	}
}

func TestRewriteFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.json")
	in := `{"process":{"capabilities":{"bounding":["CAP_SYS_RESOURCE","CAP_KILL"]}},"hostname":"h"}`
	if err := os.WriteFile(path, []byte(in), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := rewriteFile(path, true); err != nil {
		t.Fatal(err)
	}
	out, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"process":{"capabilities":{"bounding":["CAP_KILL"]}},"hostname":"h"}`
	if !reflect.DeepEqual(decode(t, out), decode(t, []byte(want))) {
		t.Errorf("file holds %s, want %s", out, want)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode after rewrite: %v, %v; want 0600", fi.Mode(), err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*.tmp")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
	// A missing file is runc's to report.
	if err := rewriteFile(filepath.Join(dir, "missing", "config.json"), true); err != nil {
		t.Errorf("missing file: %v", err)
	}
}
