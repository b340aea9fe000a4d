// Package container holds the check of the container images built from this
// folder (image_test.go, build tag image: make image-test).
package container
