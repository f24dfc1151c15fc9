// Package docs holds evalmeter's documentation (Markdown files) and the test
// that checks it: every relative link and anchor resolves, and every make
// target and evalmeter command flag it names exists.
package docs
