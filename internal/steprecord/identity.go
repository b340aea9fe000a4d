package steprecord

import "go.opentelemetry.io/collector/pdata/pcommon"

// Identity says which rank's record of which step a span is: the facts the
// contract's ids are computed from.
type Identity struct {
	Job     string
	Attempt int64
	Step    int64
	Rank    int64
}

// TraceID is the step's trace id.
func (id Identity) TraceID() pcommon.TraceID { return TraceID(id.Job, id.Attempt, id.Step) }

// RankSpanID is the id of the rank's step span.
func (id Identity) RankSpanID() pcommon.SpanID {
	return RankSpanID(id.Job, id.Attempt, id.Step, id.Rank)
}

// RootSpanID is the id of the step's root span.
func (id Identity) RootSpanID() pcommon.SpanID { return RootSpanID(id.Job, id.Attempt, id.Step) }

// ReadIdentity reads the identity of a train.step span from its attributes
// and its resource's, or says, with an *Error, which attribute leaves the
// record without one.
func ReadIdentity(span, resource pcommon.Map) (Identity, error) {
	a := Read(span, resource)
	return a.Identity()
}

// Reason says what is wrong with an attribute.
type Reason uint8

// Reasons a record has no identity.
const (
	ReasonMissing  Reason = iota + 1 // absent from the span and the resource
	ReasonType                       // present, not of the contract's type (a string for a number, 1.5 for an integer)
	ReasonEmpty                      // an empty job id
	ReasonNegative                   // a negative step, rank or attempt
	numReasons
)

var reasonText = [numReasons]string{
	ReasonMissing:  "missing",
	ReasonType:     "not of the contract's type",
	ReasonEmpty:    "empty",
	ReasonNegative: "negative",
}

func (r Reason) String() string {
	if r == 0 || r >= numReasons {
		return "unknown"
	}
	return reasonText[r]
}

// Error names the attribute that leaves a record without an identity and
// why. Every (field, reason) has one preallocated Error, so rejecting a
// record allocates nothing on the hot path.
type Error struct {
	Field  Field
	Reason Reason
}

func (e *Error) Error() string {
	return "steprecord: " + e.Field.Key() + ": " + e.Reason.String()
}

var errorTable [numFields][numReasons]Error

func init() {
	for f := range errorTable {
		for r := range errorTable[f] {
			errorTable[f][r] = Error{Field: Field(f), Reason: Reason(r)}
		}
	}
}

func errorOf(f Field, r Reason) *Error { return &errorTable[f][r] }
