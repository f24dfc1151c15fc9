// Package ci runs evalmeter's GitHub Action (action.yml) and GitLab CI template
// (ci/gitlab/evalmeter.yml) as their CI systems would: the release they install is
// made by make dist and served over loopback HTTP, the service they post to is the
// release's own evalmeter api on a throwaway PostgreSQL, and the job's files (the
// step summary, outputs and PATH of GitHub Actions; the artifacts API of GitLab) are
// real files and a real HTTP server.
package ci
