//go:build !cgo

package verify

import "errors"

// errNoCgo is what the library backend gets in a build without cgo:
// go-dcgm needs it (the command backend still works).
var errNoCgo = errors.New("built without cgo (CGO_ENABLED=0): the DCGM library is unavailable; use the command backend")

// noCgoDCGM fails Init, so no other call is ever made.
type noCgoDCGM struct{}

// NewDCGMLib returns a DCGMLib whose Init fails: this build has no cgo.
func NewDCGMLib(bool, string) DCGMLib { return noCgoDCGM{} }

func (noCgoDCGM) Init() (func(), error)                         { return nil, errNoCgo }
func (noCgoDCGM) GPUs() ([]DCGMDevice, error)                   { return nil, errNoCgo }
func (noCgoDCGM) RunDiag(int, []uint) ([]DCGMDiagResult, error) { return nil, errNoCgo }
