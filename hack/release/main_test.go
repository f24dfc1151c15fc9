package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const testChangelog = `# Changelog

## [Unreleased]

## [0.2.0] - 2026-12-01

### Added
- more

## [0.1.0] - 2026-11-25

First release.
`

func chartOf(v string) string {
	return "apiVersion: v2\nname: evalmeter\nversion: " + v + "\nappVersion: \"" + v + "\"\n"
}

// repo is a real git repository with two releases, v0.1.0 and v0.2.0, each
// with its chart, recorded in hack/releases one commit after each.
type repo struct {
	dir       string
	v1, v2    string // the releases' commits
	afterLast string // HEAD: the commit that recorded v0.2.0
}

func newRepo(t *testing.T) *repo {
	t.Helper()
	r := &repo{dir: t.TempDir()}
	r.git(t, "init", "-q", "-b", "main")
	r.git(t, "config", "user.email", "test@example.com")
	r.git(t, "config", "user.name", "test")
	r.write(t, chartPath, chartOf("0.1.0"))
	r.write(t, changelogPath, "# Changelog\n\n## [Unreleased]\n\n## [0.1.0] - 2026-11-25\n\nFirst release.\n")
	r.write(t, releasesPath, "# releases\n")
	r.write(t, migrationsDir+"/00001_a.sql", "-- +goose Up\nCREATE TABLE a (id int);\n")
	r.v1 = r.commit(t, "v0.1.0")
	r.write(t, releasesPath, "# releases\nv0.1.0 "+r.v1+"\n")
	r.commit(t, "record v0.1.0")
	r.write(t, chartPath, chartOf("0.2.0"))
	r.write(t, changelogPath, testChangelog)
	r.write(t, migrationsDir+"/00002_b.sql", "-- +goose Up\nALTER TABLE a ADD COLUMN b int;\n")
	r.v2 = r.commit(t, "v0.2.0")
	r.write(t, releasesPath, "# releases\nv0.1.0 "+r.v1+"\nv0.2.0 "+r.v2+"\n")
	r.afterLast = r.commit(t, "record v0.2.0")
	return r
}

func (r *repo) git(t *testing.T, args ...string) string {
	t.Helper()
	out, err := gitIn(r.dir)(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (r *repo) write(t *testing.T, path, content string) {
	t.Helper()
	p := filepath.Join(r.dir, path)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (r *repo) commit(t *testing.T, msg string) string {
	t.Helper()
	r.git(t, "add", "-A")
	r.git(t, "commit", "-q", "-m", msg)
	return r.git(t, "rev-parse", "HEAD")
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name   string
		breaks func(t *testing.T, r *repo)
		want   string // in the error; "" for none
	}{
		{"agree", func(*testing.T, *repo) {}, ""},
		{"tags agree", func(t *testing.T, r *repo) { r.git(t, "tag", "v0.1.0", r.v1); r.git(t, "tag", "v0.2.0", r.v2) }, ""},
		{"chart behind", func(t *testing.T, r *repo) { r.write(t, chartPath, chartOf("0.1.0")) },
			`charts/evalmeter/Chart.yaml: version "0.1.0" and appVersion "0.1.0"; the release is v0.2.0`},
		{"appVersion apart", func(t *testing.T, r *repo) {
			r.write(t, chartPath, "apiVersion: v2\nname: evalmeter\nversion: 0.2.0\nappVersion: \"0.2.1\"\n")
		}, `appVersion "0.2.1"`},
		{"changelog without the release", func(t *testing.T, r *repo) {
			r.write(t, changelogPath, strings.Replace(testChangelog, "## [0.2.0] - 2026-12-01\n", "", 1))
		}, "hack/releases records v0.2.0, which CHANGELOG.md has no section for"},
		{"changelog ahead", func(t *testing.T, r *repo) {
			r.write(t, changelogPath, strings.Replace(testChangelog, "## [Unreleased]\n", "## [Unreleased]\n\n## [0.3.0] - 2026-12-02\n", 1))
		}, "CHANGELOG.md has a section for v0.3.0, which hack/releases does not record"},
		{"no unreleased", func(t *testing.T, r *repo) {
			r.write(t, changelogPath, strings.Replace(testChangelog, "## [Unreleased]\n", "", 1))
		}, "no ## [Unreleased] section"},
		{"changelog out of order", func(t *testing.T, r *repo) {
			r.write(t, changelogPath, "# Changelog\n\n## [Unreleased]\n\n## [0.1.0] - 2026-11-25\n\n## [0.2.0] - 2026-12-01\n")
		}, "v0.2.0 below v0.1.0"},
		{"heading without a date", func(t *testing.T, r *repo) {
			r.write(t, changelogPath, strings.Replace(testChangelog, "## [0.2.0] - 2026-12-01", "## [0.2.0]", 1))
		}, "a release's heading is ## [X.Y.Z] - YYYY-MM-DD"},
		{"tag elsewhere", func(t *testing.T, r *repo) { r.git(t, "tag", "v0.2.0", r.v1) }, "the tag v0.2.0 names " + "%v1"},
		{"tag not recorded", func(t *testing.T, r *repo) { r.git(t, "tag", "v0.3.0") }, "the tag v0.3.0 is not recorded"},
		{"unknown commit", func(t *testing.T, r *repo) {
			r.write(t, releasesPath, "v0.1.0 "+r.v1+"\nv0.2.0 "+strings.Repeat("ab", 20)+"\n")
		}, "v0.2.0's commit abababababababababababababababababababab is not in this repository"},
		{"release's chart", func(t *testing.T, r *repo) {
			// v0.1.0 recorded at a commit whose chart says 0.2.0.
			r.write(t, releasesPath, "v0.1.0 "+r.v2+"\nv0.2.0 "+r.v2+"\n")
		}, "Chart.yaml at v0.1.0's commit"},
		{"releases out of order", func(t *testing.T, r *repo) {
			r.write(t, releasesPath, "v0.2.0 "+r.v2+"\nv0.1.0 "+r.v1+"\n")
		}, "v0.1.0 after v0.2.0"},
		{"a new migration", func(t *testing.T, r *repo) {
			r.write(t, migrationsDir+"/00003_c.sql", "-- +goose Up\nALTER TABLE a ADD COLUMN c int;\n")
		}, ""},
		{"released migration edited", func(t *testing.T, r *repo) {
			r.write(t, migrationsDir+"/00001_a.sql", "-- +goose Up\nCREATE TABLE a (id bigint);\n")
		}, "internal/ledger/migrations/00001_a.sql was released in v0.1.0 and has changed since"},
		{"released migration removed", func(t *testing.T, r *repo) {
			if err := os.Remove(filepath.Join(r.dir, migrationsDir, "00002_b.sql")); err != nil {
				t.Fatal(err)
			}
		}, "internal/ledger/migrations/00002_b.sql was released in v0.2.0 and is gone"},
		{"short commit", func(t *testing.T, r *repo) { r.write(t, releasesPath, "v0.1.0 "+r.v1[:12]+"\n") }, "full 40-digit commit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRepo(t)
			tt.breaks(t, r)
			_, err := check(r.dir)
			want := strings.ReplaceAll(tt.want, "%v1", r.v1)
			switch {
			case want == "" && err != nil:
				t.Errorf("check: %v", err)
			case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
				t.Errorf("check: %v; want an error containing %q", err, want)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	r := newRepo(t)
	releases, err := readReleases(r.dir)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		setup func(t *testing.T)
		want  string
	}{
		{"one after the release", func(*testing.T) {}, "v0.2.0-1-g" + r.afterLast[:12]},
		{"at the release", func(t *testing.T) { r.git(t, "checkout", "-q", r.v2) }, "v0.2.0"},
		{"at the release, changed", func(t *testing.T) { r.write(t, chartPath, "changed\n") }, "v0.2.0-dirty"},
		{"at the first release", func(t *testing.T) { r.git(t, "checkout", "-q", "-f", r.v1) }, "v0.1.0"},
		{"a tag", func(t *testing.T) { r.git(t, "checkout", "-q", r.afterLast); r.git(t, "tag", "v0.2.1") }, "v0.2.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.setup(t)
			got, err := version(r.dir, releases)
			if err != nil || got != tt.want {
				t.Errorf("version = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestPrevious(t *testing.T) {
	r := newRepo(t)
	releases, err := readReleases(r.dir)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		setup func(t *testing.T)
		want  string // the release's commit; "" for an error
	}{
		{"after the last release", func(*testing.T) {}, r.v2},
		{"at the last release", func(t *testing.T) { r.git(t, "checkout", "-q", r.v2) }, r.v1},
		{"at the first release", func(t *testing.T) { r.git(t, "checkout", "-q", r.v1) }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.setup(t)
			got, err := previous(r.dir, releases)
			if tt.want == "" && err == nil || tt.want != "" && (err != nil || got.commit != tt.want) {
				t.Errorf("previous = %+v, %v; want %s", got, err, tt.want)
			}
		})
	}
}

// The repository's own records agree: the same check as make release-check.
func TestRepository(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is not on PATH")
	}
	var stdout, stderr bytes.Buffer
	if status := run([]string{"check"}, "../..", &stdout, &stderr); status != 0 {
		t.Errorf("release check of this repository: exit %d\n%s", status, stderr.String())
	}
}
