package gpufaultsreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpufaultsreceiver"

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sort"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/otelcol-gpu/otelcol-gpu/internal/ownership"
)

// singleOwnerProtocol is the group protocol name; every member must offer it.
const singleOwnerProtocol = "otelcol-gpu-single-owner"

// maxMemberJSON bounds the member a join's or an assignment's user data
// names (a name and a console URL, both bounded by the config).
const maxMemberJSON = 4096

// singleOwnerBalancer gives every partition of every topic to one member.
// It is sticky: a member that owned the partitions says so in its join
// metadata (the generation it got them in) and keeps them while it is in the
// group. Eager franz-go consumers revoke everything before rejoining, so the
// claim is kept here rather than read from the current assignment.
// Without a claim the first member in the broker's order (instance id,
// then member id: deterministic) is chosen.
//
// The election is visible to every member: each states its name (and its
// console's URL) in its join metadata after the claim, and the group
// leader writes the chosen owner's into every member's assignment, so a
// standby knows who acts.
type singleOwnerBalancer struct {
	// claim is the generation in which this member last got partitions,
	// plus one; 0 when it owns none.
	claim atomic.Int64
	// self is what this member advertises.
	self ownership.Member
	// owner is the owner the last assignment named (nil: none did).
	owner atomic.Pointer[ownership.Member]
}

var _ kgo.GroupBalancer = (*singleOwnerBalancer)(nil)

func (*singleOwnerBalancer) ProtocolName() string { return singleOwnerProtocol }
func (*singleOwnerBalancer) IsCooperative() bool  { return false }

// JoinGroupMetadata is the consumer protocol's metadata with the claim in
// UserData (8 bytes, big endian), then this member as JSON.
func (b *singleOwnerBalancer) JoinGroupMetadata(topics []string, _ map[string][]int32, generation int32) []byte {
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Version = 3
	meta.Topics = topics
	meta.Generation = generation
	meta.UserData = binary.BigEndian.AppendUint64(nil, uint64(b.claim.Load()))
	if self, err := json.Marshal(b.self); err == nil {
		meta.UserData = append(meta.UserData, self...)
	}
	return meta.AppendTo(nil)
}

// ParseSyncAssignment reads this member's partitions and the owner the
// group leader named in the assignment's UserData.
func (b *singleOwnerBalancer) ParseSyncAssignment(assignment []byte) (map[string][]int32, error) {
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(assignment); err != nil {
		return nil, fmt.Errorf("sync assignment parse failed: %w", err)
	}
	out := make(map[string][]int32, len(a.Topics))
	for _, t := range a.Topics {
		out[t.Topic] = append(out[t.Topic], t.Partitions...)
	}
	if owner, ok := decodeMember(a.UserData); ok {
		b.owner.Store(&owner)
	} else {
		b.owner.Store(nil) // a leader of an earlier version names nobody
	}
	return out, nil
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
	return namedPlan{plan: plan, owner: ownerOf(member, meta)}
}

// ownerOf is the member as it named itself, else by its instance or
// member id (a member of an earlier version).
func ownerOf(member *kmsg.JoinGroupResponseMember, meta *kmsg.ConsumerMemberMetadata) ownership.Member {
	if len(meta.UserData) > 8 {
		if m, ok := decodeMember(meta.UserData[8:]); ok {
			return m
		}
	}
	if member.InstanceID != nil {
		return ownership.Member{Name: *member.InstanceID}
	}
	return ownership.Member{Name: member.MemberID}
}

// decodeMember reads a member's JSON; false for anything else.
func decodeMember(data []byte) (ownership.Member, bool) {
	var m ownership.Member
	if len(data) == 0 || len(data) > maxMemberJSON || json.Unmarshal(data, &m) != nil || m.Name == "" {
		return ownership.Member{}, false
	}
	return m, true
}

// namedPlan is the plan with the owner named in every member's
// assignment.
type namedPlan struct {
	plan  *kgo.BalancePlan
	owner ownership.Member
}

func (p namedPlan) IntoSyncAssignment() []kmsg.SyncGroupRequestGroupAssignment {
	userData, _ := json.Marshal(p.owner)
	out := p.plan.IntoSyncAssignment()
	for i := range out {
		var a kmsg.ConsumerMemberAssignment
		if a.ReadFrom(out[i].MemberAssignment) != nil {
			continue // cannot happen: franz-go encoded it
		}
		a.UserData = userData
		out[i].MemberAssignment = a.AppendTo(nil)
	}
	return out
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

// claimOf decodes the claim at the start of UserData; anything shorter
// (another client's metadata) is no claim.
func claimOf(userData []byte) int64 {
	if len(userData) < 8 {
		return 0
	}
	return int64(binary.BigEndian.Uint64(userData[:8]))
}
