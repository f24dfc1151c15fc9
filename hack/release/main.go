// Command release checks that a release's records agree, and names the
// version of the working tree (docs/development.md#releases).
//
//	go run ./hack/release check     # make release-check
//	go run ./hack/release version   # the version make dist and make image stamp
//	go run ./hack/release previous  # "vX.Y.Z COMMIT": the release make test-e2e-upgrade upgrades from
//
// A release is recorded three times, since git tags may not travel with the
// repository: a heading of CHANGELOG.md, a line "vX.Y.Z COMMIT" of
// hack/releases, and the chart's version and appVersion at that commit. A tag
// vX.Y.Z, where there is one, must name the same commit.
package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

const (
	changelogPath = "CHANGELOG.md"
	releasesPath  = "hack/releases"
	chartPath     = "charts/evalmeter/Chart.yaml"
	// migrationsDir holds the ledger's migrations: once released, each is
	// run by every install that upgrades, so it never changes.
	migrationsDir = "internal/ledger/migrations"
)

func main() {
	os.Exit(run(os.Args[1:], ".", os.Stdout, os.Stderr))
}

func run(args []string, dir string, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(stderr, "usage: release check|version|previous")
		return 2
	}
	switch args[0] {
	case "check":
		notes, err := check(dir)
		for _, n := range notes {
			fmt.Fprintln(stderr, "release-check: "+n)
		}
		if err != nil {
			fmt.Fprintln(stderr, "release-check: "+err.Error())
			return 1
		}
		fmt.Fprintln(stdout, "release-check: CHANGELOG.md, hack/releases, the chart and the tags agree")
		return 0
	case "version", "previous":
		out, err := name(dir, args[0])
		if err != nil {
			fmt.Fprintln(stderr, "release: "+err.Error())
			return 1
		}
		fmt.Fprintln(stdout, out)
		return 0
	}
	fmt.Fprintf(stderr, "release: unknown command %q: use check, version or previous\n", args[0])
	return 2
}

// name answers the version or previous command from hack/releases: the
// working tree's version, or "vX.Y.Z COMMIT" of the release before HEAD.
func name(dir, command string) (string, error) {
	releases, err := readReleases(dir)
	if err != nil {
		return "", err
	}
	if command == "version" {
		return version(dir, releases)
	}
	r, err := previous(dir, releases)
	if err != nil {
		return "", err
	}
	return r.version.String() + " " + r.commit, nil
}

// semver is a release's version, vMAJOR.MINOR.PATCH; releases have no
// pre-release or build part.
type semver [3]int

var semverPattern = regexp.MustCompile(`^v?(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$`)

func parseSemver(s string) (semver, bool) {
	m := semverPattern.FindStringSubmatch(s)
	if m == nil {
		return semver{}, false
	}
	var v semver
	for i := range v {
		v[i], _ = strconv.Atoi(m[i+1])
	}
	return v, true
}

func (v semver) String() string { return fmt.Sprintf("v%d.%d.%d", v[0], v[1], v[2]) }

// less orders versions by precedence.
func (v semver) less(w semver) bool {
	for i := range v {
		if v[i] != w[i] {
			return v[i] < w[i]
		}
	}
	return false
}

// release is one line of hack/releases.
type release struct {
	version semver
	commit  string
	line    int
}

var commitPattern = regexp.MustCompile(`^[0-9a-f]{40}$`)

// readReleases reads hack/releases: "vX.Y.Z COMMIT" lines, oldest first;
// blank lines and # comments are skipped.
func readReleases(dir string) ([]release, error) {
	b, err := os.ReadFile(dir + "/" + releasesPath)
	if err != nil {
		return nil, err
	}
	var out []release
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		v, ok := parseSemver(f[0])
		if len(f) != 2 || !ok || !strings.HasPrefix(f[0], "v") || !commitPattern.MatchString(f[1]) {
			return nil, fmt.Errorf("%s:%d: %q: write a release as vMAJOR.MINOR.PATCH and its full 40-digit commit", releasesPath, n, line)
		}
		if len(out) > 0 && !out[len(out)-1].version.less(v) {
			return nil, fmt.Errorf("%s:%d: %s after %s: list the releases oldest first, each newer than the last", releasesPath, n, v, out[len(out)-1].version)
		}
		out = append(out, release{v, f[1], n})
	}
	return out, sc.Err()
}

// changelogHeading is a release's heading in Keep a Changelog's form:
// "## [1.2.3] - 2026-11-25".
var changelogHeading = regexp.MustCompile(`^## \[([^\]]+)\](?: - (\d{4}-\d{2}-\d{2}))?\s*$`)

// readChangelog returns the released versions of CHANGELOG.md, newest first,
// and checks that it opens with an Unreleased section.
func readChangelog(dir string) ([]semver, error) {
	b, err := os.ReadFile(dir + "/" + changelogPath)
	if err != nil {
		return nil, err
	}
	var versions []semver
	unreleased := false
	for n, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "## ") {
			continue
		}
		m := changelogHeading.FindStringSubmatch(line)
		switch {
		case m == nil:
			return nil, fmt.Errorf("%s:%d: %q: a section's heading is ## [X.Y.Z] - YYYY-MM-DD, or ## [Unreleased]", changelogPath, n+1, line)
		case m[1] == "Unreleased":
			if unreleased || len(versions) > 0 {
				return nil, fmt.Errorf("%s:%d: the Unreleased section comes once, first", changelogPath, n+1)
			}
			unreleased = true
		default:
			v, ok := parseSemver(m[1])
			if !ok || strings.HasPrefix(m[1], "v") || m[2] == "" {
				return nil, fmt.Errorf("%s:%d: %q: a release's heading is ## [X.Y.Z] - YYYY-MM-DD", changelogPath, n+1, line)
			}
			if len(versions) > 0 && !v.less(versions[len(versions)-1]) {
				return nil, fmt.Errorf("%s:%d: %s below %s: list the releases newest first", changelogPath, n+1, v, versions[len(versions)-1])
			}
			versions = append(versions, v)
		}
	}
	if !unreleased {
		return nil, fmt.Errorf("%s has no ## [Unreleased] section: keep one, first, for the changes since the last release", changelogPath)
	}
	return versions, nil
}

// chart is what a release changes in Chart.yaml.
type chart struct {
	Version    string `json:"version"`
	AppVersion string `json:"appVersion"`
}

func parseChart(b []byte) (chart, error) {
	var c chart
	err := yaml.Unmarshal(b, &c)
	return c, err
}

// check compares the records. Its notes say what it could not check.
func check(dir string) (notes []string, err error) {
	releases, err := readReleases(dir)
	if err != nil {
		return nil, err
	}
	logged, err := readChangelog(dir)
	if err != nil {
		return nil, err
	}
	if len(releases) == 0 {
		return nil, fmt.Errorf("%s records no release", releasesPath)
	}
	// The same releases, in both.
	recorded := map[semver]bool{}
	for _, r := range releases {
		recorded[r.version] = true
	}
	for _, v := range logged {
		if !recorded[v] {
			return nil, fmt.Errorf("%s has a section for %s, which %s does not record: add \"%s COMMIT\" to it, COMMIT being the release's", changelogPath, v, releasesPath, v)
		}
		delete(recorded, v)
	}
	for _, r := range releases {
		if recorded[r.version] {
			return nil, fmt.Errorf("%s records %s, which %s has no section for: add ## [%s] - DATE", releasesPath, r.version, changelogPath, strings.TrimPrefix(r.version.String(), "v"))
		}
	}
	latest := releases[len(releases)-1].version
	b, err := os.ReadFile(dir + "/" + chartPath)
	if err != nil {
		return nil, err
	}
	c, err := parseChart(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", chartPath, err)
	}
	if err := sameVersion(chartPath, c, latest); err != nil {
		return nil, err
	}

	g := gitIn(dir)
	shallow, _ := g("rev-parse", "--is-shallow-repository")
	for _, r := range releases {
		if _, err := g("cat-file", "-e", r.commit+"^{commit}"); err != nil {
			if shallow == "true" {
				notes = append(notes, fmt.Sprintf("NOT CHECKED: %s's commit %s is not in this shallow clone (git fetch --unshallow)", r.version, r.commit[:12]))
				continue
			}
			return notes, fmt.Errorf("%s:%d: %s's commit %s is not in this repository", releasesPath, r.line, r.version, r.commit)
		}
		if _, err := g("merge-base", "--is-ancestor", r.commit, "HEAD"); err != nil {
			return notes, fmt.Errorf("%s:%d: %s's commit %s is not an ancestor of HEAD: a release is a commit of this history", releasesPath, r.line, r.version, r.commit)
		}
		at, err := g("show", r.commit+":"+chartPath)
		if err != nil {
			return notes, fmt.Errorf("%s at %s's commit: %v", chartPath, r.version, err)
		}
		c, err := parseChart([]byte(at))
		if err != nil {
			return notes, fmt.Errorf("%s at %s's commit: %v", chartPath, r.version, err)
		}
		if err := sameVersion(chartPath+" at "+r.version.String()+"'s commit", c, r.version); err != nil {
			return notes, err
		}
		if err := sameMigrations(dir, g, r); err != nil {
			return notes, err
		}
		if tagged, err := g("rev-parse", "-q", "--verify", "refs/tags/"+r.version.String()+"^{commit}"); err == nil && tagged != r.commit {
			return notes, fmt.Errorf("the tag %s names %s, but %s:%d records %s", r.version, tagged, releasesPath, r.line, r.commit)
		}
	}
	// A tag of a release that is not recorded.
	tags, _ := g("tag", "--list", "v*")
	for _, t := range strings.Fields(tags) {
		if v, ok := parseSemver(t); ok && t == v.String() {
			if !slices.ContainsFunc(releases, func(r release) bool { return r.version == v }) {
				return notes, fmt.Errorf("the tag %s is not recorded in %s and %s", t, releasesPath, changelogPath)
			}
		}
	}
	return notes, nil
}

// sameMigrations checks that every migration r released is in the working
// tree, unchanged: installs that ran it would not run it again.
func sameMigrations(dir string, g func(...string) (string, error), r release) error {
	out, err := g("ls-tree", "-r", r.commit, "--", migrationsDir+"/")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(out, "\n") {
		meta, path, ok := strings.Cut(line, "\t")
		f := strings.Fields(meta)
		if !ok || len(f) != 3 {
			continue
		}
		now, err := g("hash-object", "--", path)
		if err != nil {
			return fmt.Errorf("%s was released in %s and is gone: a released migration stays (docs/development.md#migrations)", path, r.version)
		}
		if now != f[2] {
			return fmt.Errorf("%s was released in %s and has changed since: a released migration is never edited; undo the change and add a new migration (docs/development.md#migrations)", path, r.version)
		}
	}
	return nil
}

// sameVersion checks that a chart's version and appVersion are v's.
func sameVersion(where string, c chart, v semver) error {
	want := strings.TrimPrefix(v.String(), "v")
	if c.Version != want || c.AppVersion != want {
		return fmt.Errorf("%s: version %q and appVersion %q; the release is %s, so both are %q", where, c.Version, c.AppVersion, v, want)
	}
	return nil
}

// version names the working tree: the release at HEAD (recorded, or a tag
// vX.Y.Z), else the newest release below it as git describe would
// ("v0.1.0-3-gabcdef123456"), with "-dirty" for uncommitted changes. A
// release's own commit does not record itself (hack/releases gets its line in
// the next commit), so releases are those of the newest tree.
func version(dir string, releases []release) (string, error) {
	g := gitIn(dir)
	head, err := g("rev-parse", "HEAD")
	if err != nil {
		return "", fmt.Errorf("not a git checkout (%v): set VERSION", err)
	}
	dirty := ""
	if out, err := g("status", "--porcelain", "--untracked-files=no"); err == nil && out != "" {
		dirty = "-dirty"
	}
	if tag, err := g("describe", "--tags", "--exact-match", "--match", "v*", "HEAD"); err == nil {
		if v, ok := parseSemver(tag); ok && tag == v.String() {
			return tag + dirty, nil
		}
	}
	for i := len(releases) - 1; i >= 0; i-- {
		r := releases[i]
		if r.commit == head {
			return r.version.String() + dirty, nil
		}
		if _, err := g("merge-base", "--is-ancestor", r.commit, "HEAD"); err == nil {
			n, err := g("rev-list", "--count", r.commit+"..HEAD")
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("%s-%s-g%s%s", r.version, n, head[:12], dirty), nil
		}
	}
	return "v0.0.0-g" + head[:12] + dirty, nil
}

// previous is the newest release before HEAD: the one an operator upgrades
// from to the working tree. HEAD's own release, when it is one, is not.
func previous(dir string, releases []release) (release, error) {
	g := gitIn(dir)
	head, err := g("rev-parse", "HEAD")
	if err != nil {
		return release{}, fmt.Errorf("not a git checkout: %v", err)
	}
	for i := len(releases) - 1; i >= 0; i-- {
		r := releases[i]
		if r.commit == head {
			continue
		}
		if _, err := g("merge-base", "--is-ancestor", r.commit, "HEAD"); err == nil {
			return r, nil
		}
	}
	return release{}, fmt.Errorf("%s records no release before HEAD %s (or its commits are not in this clone: git fetch --unshallow)", releasesPath, head[:12])
}

// gitIn runs git in dir and returns its trimmed output.
func gitIn(dir string) func(args ...string) (string, error) {
	return func(args ...string) (string, error) {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return "", errors.New(strings.TrimSpace("git " + strings.Join(args, " ") + ": " + err.Error() + " " + stderr.String()))
		}
		return strings.TrimSpace(string(out)), nil
	}
}
