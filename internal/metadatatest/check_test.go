package metadatatest

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestProblemsCompare(t *testing.T) {
	var ps problems
	ps.compare("type", "", "fake", "fake")
	ps.compare("metrics.x", "unit", "By", "{byte}")
	ps.compare("type", "", "fake", "other")
	assert.Equal(t, problems{
		`metrics.x unit: metadata.yaml has "By", the code "{byte}"`,
		`type: metadata.yaml has "fake", the code "other"`,
	}, ps)
}
