// Package sdktest tests the Python step SDK (sdk/python/otelcol_gpu_step.py)
// from Go: python3 processes using the module post to a stand-in agent that
// decodes their OTLP/HTTP JSON with pdata, and the tests check every id
// against the contract of docs/training-scripts.md. It has no code of its own.
package sdktest // import "github.com/otelcol-gpu/otelcol-gpu/sdk/python/sdktest"
