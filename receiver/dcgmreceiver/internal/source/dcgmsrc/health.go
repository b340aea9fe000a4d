package dcgmsrc

// GPU health as logged: once per change, not once per collection.

import (
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
)

// gpuHealth is what was last logged about a GPU.
type gpuHealth uint8

const (
	gpuOK gpuHealth = iota
	gpuUnresponsive
	gpuFailing
)

// setHealthLocked logs a GPU's health when it changes.
func (s *Source) setHealthLocked(gpu model.GPU, h gpuHealth, err error) {
	id := uint(gpu.Index)
	prev := s.health[id]
	if prev == h {
		return
	}
	s.health[id] = h
	switch h {
	case gpuUnresponsive:
		s.logger.Warn("GPU did not answer in time; reporting it unresponsive", gpuFields(gpu), zap.Error(err))
	case gpuFailing:
		s.logger.Warn("Reading GPU failed", gpuFields(gpu), zap.Error(err))
	case gpuOK:
		s.logger.Info("GPU answers again", gpuFields(gpu))
	}
}

func gpuFields(g model.GPU) zap.Field {
	return zap.Dict("gpu", zap.Int("index", g.Index), zap.String("uuid", g.UUID), zap.String("model", g.Model))
}
