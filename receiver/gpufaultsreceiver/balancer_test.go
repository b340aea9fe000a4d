package gpufaultsreceiver

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
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
