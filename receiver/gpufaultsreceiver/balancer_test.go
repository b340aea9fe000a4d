package gpufaultsreceiver

import (
	"encoding/binary"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/otelcol-gpu/otelcol-gpu/internal/ownership"
)

// joined is what the group leader sees: each member's join metadata, as
// written by a balancer holding claim.
func joined(t *testing.T, claims map[string]int64, order ...string) []kmsg.JoinGroupResponseMember {
	t.Helper()
	var out []kmsg.JoinGroupResponseMember
	for _, id := range order {
		b := &singleOwnerBalancer{}
		b.claim.Store(claims[id])
		m := kmsg.NewJoinGroupResponseMember()
		m.MemberID = id
		m.ProtocolMetadata = b.JoinGroupMetadata([]string{"gpu_faults"}, nil, 7)
		out = append(out, m)
	}
	return out
}

// balance runs the balancer as the group leader would and returns the plan
// by member id.
func balance(t *testing.T, members []kmsg.JoinGroupResponseMember, partitions int32) map[string]map[string][]int32 {
	t.Helper()
	mb, topics, err := (&singleOwnerBalancer{}).MemberBalancer(members)
	require.NoError(t, err)
	assert.Contains(t, topics, "gpu_faults")
	into, err := mb.(kgo.GroupMemberBalancerOrError).BalanceOrError(map[string]int32{"gpu_faults": partitions})
	require.NoError(t, err)
	plan := map[string]map[string][]int32{}
	for _, a := range into.IntoSyncAssignment() {
		got, err := kgo.ParseConsumerSyncAssignment(a.MemberAssignment)
		require.NoError(t, err)
		plan[a.MemberID] = got
	}
	return plan
}

func owners(plan map[string]map[string][]int32) map[string][]int32 {
	out := map[string][]int32{}
	for id, topics := range plan {
		if ps := topics["gpu_faults"]; len(ps) > 0 {
			out[id] = ps
		}
	}
	return out
}

func TestBalancerSingleOwner(t *testing.T) {
	for _, tc := range []struct {
		name   string
		claims map[string]int64
		want   string
	}{
		{"no claim: the first member", nil, "m-a"},
		{"sticky: the member that owned them", map[string]int64{"m-c": 5}, "m-c"},
		{"two claims: the newest generation", map[string]int64{"m-b": 3, "m-c": 9}, "m-c"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := balance(t, joined(t, tc.claims, "m-a", "m-b", "m-c"), 6)
			assert.Equal(t, map[string][]int32{tc.want: {0, 1, 2, 3, 4, 5}}, owners(plan))
			assert.Len(t, plan, 3, "every member gets an assignment, empty for standbys")
		})
	}
}

func TestBalancerForeignMetadata(t *testing.T) {
	members := joined(t, nil, "m-a", "m-b")
	members[0].ProtocolMetadata = []byte{0xff}
	_, _, err := (&singleOwnerBalancer{}).MemberBalancer(members)
	assert.Error(t, err, "undecodable member metadata must fail the balance, not panic")
	assert.Zero(t, claimOf([]byte("short")))
}

// The group leader names the owner, as it advertised itself, in every
// member's assignment; each member reads it from its own.
func TestBalancerNamesTheOwnerToEveryMember(t *testing.T) {
	var members []kmsg.JoinGroupResponseMember
	for i, name := range []string{"gw-0", "gw-1", "gw-2"} {
		b := &singleOwnerBalancer{self: ownership.Member{Name: name, Console: "https://" + name + ".gw:8787"}}
		if name == "gw-1" {
			b.claim.Store(4) // the sticky owner
		}
		m := kmsg.NewJoinGroupResponseMember()
		m.MemberID = "m-" + strconv.Itoa(i)
		m.ProtocolMetadata = b.JoinGroupMetadata([]string{"gpu_faults"}, nil, 7)
		members = append(members, m)
	}
	mb, _, err := (&singleOwnerBalancer{}).MemberBalancer(members)
	require.NoError(t, err)
	into, err := mb.(kgo.GroupMemberBalancerOrError).BalanceOrError(map[string]int32{"gpu_faults": 3})
	require.NoError(t, err)
	assignments := into.IntoSyncAssignment()
	require.Len(t, assignments, 3)
	for _, a := range assignments {
		reader := &singleOwnerBalancer{}
		got, err := reader.ParseSyncAssignment(a.MemberAssignment)
		require.NoError(t, err)
		if a.MemberID == "m-1" {
			assert.Equal(t, map[string][]int32{"gpu_faults": {0, 1, 2}}, got)
		} else {
			assert.Empty(t, got["gpu_faults"], a.MemberID)
		}
		owner := reader.owner.Load()
		require.NotNil(t, owner, a.MemberID)
		assert.Equal(t, ownership.Member{Name: "gw-1", Console: "https://gw-1.gw:8787"}, *owner, a.MemberID)
	}
}

// A member of an earlier version (an 8-byte claim, no name) is named by
// its instance id when it owns; an assignment of an earlier leader (no
// UserData) names nobody.
func TestBalancerEarlierVersions(t *testing.T) {
	old := kmsg.NewConsumerMemberMetadata()
	old.Version = 3
	old.Topics = []string{"gpu_faults"}
	old.UserData = binary.BigEndian.AppendUint64(nil, 9)
	m := kmsg.NewJoinGroupResponseMember()
	m.MemberID, m.InstanceID = "m-old", kmsg.StringPtr("otelcol-gpu-gateway-2")
	m.ProtocolMetadata = old.AppendTo(nil)
	members := append(joined(t, nil, "m-a"), m)
	mb, _, err := (&singleOwnerBalancer{}).MemberBalancer(members)
	require.NoError(t, err)
	into, err := mb.(kgo.GroupMemberBalancerOrError).BalanceOrError(map[string]int32{"gpu_faults": 2})
	require.NoError(t, err)
	reader := &singleOwnerBalancer{}
	_, err = reader.ParseSyncAssignment(into.IntoSyncAssignment()[0].MemberAssignment)
	require.NoError(t, err)
	require.NotNil(t, reader.owner.Load())
	assert.Equal(t, ownership.Member{Name: "otelcol-gpu-gateway-2"}, *reader.owner.Load(), "the claim wins; named by instance id")

	plain := kmsg.NewConsumerMemberAssignment()
	topic := kmsg.NewConsumerMemberAssignmentTopic()
	topic.Topic, topic.Partitions = "gpu_faults", []int32{0}
	plain.Topics = append(plain.Topics, topic)
	reader.owner.Store(&ownership.Member{Name: "stale"})
	got, err := reader.ParseSyncAssignment(plain.AppendTo(nil))
	require.NoError(t, err)
	assert.Equal(t, map[string][]int32{"gpu_faults": {0}}, got)
	assert.Nil(t, reader.owner.Load(), "no UserData: the owner is unknown, not the previous one")

	_, err = reader.ParseSyncAssignment([]byte{0x01})
	assert.Error(t, err, "an undecodable assignment fails, it does not panic")
}
