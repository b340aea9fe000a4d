// Package kubernetes holds the tests of the Helm chart in ../helm/otelcol-gpu
// (the one definition of the Kubernetes deployment) and of the Strimzi
// example in ../kafka/strimzi. The tests without tags render the chart with
// the helm CLI (.tools/bin/helm: make tools) and check the copies in its
// files/ and rendered/ here; the envtest-tagged tests render it with every
// values file of its ci/ folder, dry-run each object against a real
// kube-apiserver with the prometheus-operator CRDs of testdata/, and
// helm-install it there (make envtest-bin first). dev-kafka is the
// single-node Kafka for the chart's dev values.
package kubernetes
