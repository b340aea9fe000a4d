package gpufaultsreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpufaultsreceiver"

import (
	"encoding/binary"
	"sort"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// singleOwnerProtocol is the group protocol name; every member must offer it.
const singleOwnerProtocol = "otelcol-gpu-single-owner"

// singleOwnerBalancer gives every partition of every topic to one member.
// It is sticky: a member that owned the partitions says so in its join
// metadata (the generation it got them in) and keeps them while it is in the
// group. Eager franz-go consumers revoke everything before rejoining, so the
// claim is kept here rather than read from the current assignment.
// Without a claim the first member in the broker's order (instance id,
// then member id: deterministic) is chosen.
type singleOwnerBalancer struct {
	// claim is the generation in which this member last got partitions,
	// plus one; 0 when it owns none.
	claim atomic.Int64
}

var _ kgo.GroupBalancer = (*singleOwnerBalancer)(nil)

func (*singleOwnerBalancer) ProtocolName() string { return singleOwnerProtocol }
func (*singleOwnerBalancer) IsCooperative() bool  { return false }

// JoinGroupMetadata is the consumer protocol's metadata with the claim in
// UserData (8 bytes, big endian).
func (b *singleOwnerBalancer) JoinGroupMetadata(topics []string, _ map[string][]int32, generation int32) []byte {
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Version = 3
	meta.Topics = topics
	meta.Generation = generation
	meta.UserData = binary.BigEndian.AppendUint64(nil, uint64(b.claim.Load()))
	return meta.AppendTo(nil)
}

func (*singleOwnerBalancer) ParseSyncAssignment(assignment []byte) (map[string][]int32, error) {
	return kgo.ParseConsumerSyncAssignment(assignment)
}

func (b *singleOwnerBalancer) MemberBalancer(members []kmsg.JoinGroupResponseMember) (kgo.GroupMemberBalancer, map[string]struct{}, error) {
	cb, err := kgo.NewConsumerBalancer(b, members)
	return cb, cb.MemberTopics(), err
}

// Balance implements kgo.ConsumerBalancerBalance.
func (*singleOwnerBalancer) Balance(cb *kgo.ConsumerBalancer, topics map[string]int32) kgo.IntoSyncAssignment {
	plan := cb.NewPlan()
	owner := chooseOwner(cb)
	if owner < 0 {
		return plan
	}
	member, meta := cb.MemberAt(owner)
	names := append([]string(nil), meta.Topics...)
	sort.Strings(names)
	for _, topic := range names {
		n, ok := topics[topic]
		if !ok {
			continue
		}
		partitions := make([]int32, n)
		for i := range partitions {
			partitions[i] = int32(i)
		}
		plan.AddPartitions(member, topic, partitions)
	}
	return plan
}

// chooseOwner returns the index of the member with the newest claim, else
// 0 (the first member); -1 for an empty group.
func chooseOwner(cb *kgo.ConsumerBalancer) int {
	owner, best, i := -1, int64(0), 0
	cb.EachMember(func(_ *kmsg.JoinGroupResponseMember, meta *kmsg.ConsumerMemberMetadata) {
		if owner < 0 {
			owner = i
		}
		if c := claimOf(meta.UserData); c > best {
			owner, best = i, c
		}
		i++
	})
	return owner
}

// claimOf decodes UserData; anything else (another client's metadata) is no
// claim.
func claimOf(userData []byte) int64 {
	if len(userData) != 8 {
		return 0
	}
	return int64(binary.BigEndian.Uint64(userData))
}
