// A stand-in for registry.k8s.io/pause in the offline kind node image
// (hack/offline/build-node-image.sh): no dependencies.
module github.com/evalmeter/evalmeter/hack/offline/tools/kind/pause

go 1.26.8
