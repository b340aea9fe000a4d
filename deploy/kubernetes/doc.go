// Package kubernetes holds the tests of the Kubernetes manifests in this
// folder (kustomize base and overlays) and of the Strimzi example in
// ../kafka/strimzi. The envtest-tagged tests render every overlay and
// dry-run it against a real kube-apiserver (make envtest-bin first).
package kubernetes
