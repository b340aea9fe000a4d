package semconv

import (
	"reflect"
	"regexp"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// docs/semconv.md rule 3: lower-case, dot-separated segments, "_" inside a
// segment. Upper case appears only where a sysfs file name is an attribute
// value, never in a name.
var nameRule = regexp.MustCompile(`^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$`)

func TestNamesFollowRules(t *testing.T) {
	names := map[string]string{
		"AttrHostName": AttrHostName, "AttrIBDevice": AttrIBDevice, "AttrIBPort": AttrIBPort,
		"AttrIBLinkLayer": AttrIBLinkLayer, "AttrIBState": AttrIBState, "AttrIBPhysState": AttrIBPhysState,
		"AttrIBHWCounter": AttrIBHWCounter, "AttrIBHCAType": AttrIBHCAType, "AttrIBBoardID": AttrIBBoardID,
		"AttrIBFWVer": AttrIBFWVer, "AttrIBNodeGUID": AttrIBNodeGUID,
		"AttrNetworkIODirection": AttrNetworkIODirection, "AttrErrorType": AttrErrorType,
		"AttrGPUUUID": AttrGPUUUID, "AttrGPUIndex": AttrGPUIndex, "AttrTrainingJobID": AttrTrainingJobID,
		"AttrTrainingRank": AttrTrainingRank, "AttrIterationStep": AttrIterationStep,
		"MetricHWNetworkIO": MetricHWNetworkIO, "MetricHWNetworkPackets": MetricHWNetworkPackets,
		"MetricHWErrors": MetricHWErrors, "MetricIBPortXmitWait": MetricIBPortXmitWait,
		"MetricIBPortHWCounter": MetricIBPortHWCounter, "MetricIBPortState": MetricIBPortState,
		"MetricIBPortPhysState": MetricIBPortPhysState, "MetricIBPortRate": MetricIBPortRate,
		"MetricIBDeviceInfo": MetricIBDeviceInfo,
	}
	for ident, name := range names {
		if !nameRule.MatchString(name) {
			t.Errorf("%s = %q breaks the naming rule %s", ident, name, nameRule)
		}
	}
}

// An attribute and a metric must not share a name: after translation to
// Prometheus a label and a metric name would collide in readers' minds and
// in recording rules.
func TestMetricAndAttributeNamesDiffer(t *testing.T) {
	attrs := map[string]bool{}
	for _, a := range []string{AttrHostName, AttrIBDevice, AttrIBPort, AttrIBLinkLayer, AttrIBState,
		AttrIBPhysState, AttrIBHWCounter, AttrIBHCAType, AttrIBBoardID, AttrIBFWVer, AttrIBNodeGUID,
		AttrNetworkIODirection, AttrErrorType} {
		if attrs[a] {
			t.Errorf("attribute %q declared twice", a)
		}
		attrs[a] = true
	}
	for _, m := range []string{MetricHWNetworkIO, MetricHWNetworkPackets, MetricHWErrors, MetricIBPortXmitWait,
		MetricIBPortHWCounter, MetricIBPortState, MetricIBPortPhysState, MetricIBPortRate, MetricIBDeviceInfo} {
		if attrs[m] {
			t.Errorf("%q is both a metric and an attribute", m)
		}
	}
	if reflect.DeepEqual(DirectionTransmit, DirectionReceive) {
		t.Error("directions must differ")
	}
}
