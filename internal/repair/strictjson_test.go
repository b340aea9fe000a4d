package repair

import (
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDecodeStrict(t *testing.T) {
	var r VerifyRequest
	require.NoError(t, DecodeStrict([]byte(`{"id":"a","node":"n","fault_id":"f","checks":[{"check":"dcgm_diag","level":2}]}`), &r))
	assert.Equal(t, VerifyRequest{ID: "a", Node: "n", FaultID: "f", Checks: []CheckSpec{{Check: CheckDiag, Level: 2}}}, r)

	for body, want := range map[string]error{
		`{"id":"a","id":"b"}`:                     ErrRepeatedKey,
		`{"id":"a","ID":"b"}`:                     ErrRepeatedKey,
		`{"node":"a","NODE":"b"}`:                 ErrRepeatedKey,
		`{"checks":[{"check":"x","check":"y"}]}`:  ErrRepeatedKey,
		`{"id":"a","extra":1}`:                    ErrUnknownField,
		`{"checks":[{"check":"x","window_s":1}]}`: ErrUnknownField,
		`{"id":"a"} {"id":"b"}`:                   ErrSyntax,
		`{"id":"a"`:                               ErrSyntax,
		`{"id":1}`:                                ErrSyntax,
		``:                                        ErrSyntax,
		`[` + strings.Repeat(`[`, 40) + strings.Repeat(`]`, 41): ErrSyntax,
	} {
		var r VerifyRequest
		assert.ErrorIs(t, DecodeStrict([]byte(body), &r), want, body)
	}
}

// A property over generated bodies: a valid request of each kind decodes;
// the same body with any one key repeated, at any nesting level (top
// level, a check object, an object nested in an unknown place), with the
// same or another value, in any case spelling, is refused as
// ErrRepeatedKey. Seeded: a failure prints its seed and body.
func TestRepeatedKeysAtEveryLevelRefused(t *testing.T) {
	const seed = 33
	r := rand.New(rand.NewPCG(seed, 33))
	for i := 0; i < 2000; i++ {
		v := genValue(r)
		body := marshalObject(r, v)
		// The generated body parses and has no repeated key.
		var generic any
		require.NoError(t, DecodeStrict([]byte(body), &generic), "seed %d: %s", seed, body)

		// Repeat one key at a random object.
		mutated, ok := repeatKey(r, v)
		if !ok {
			continue
		}
		got := DecodeStrict([]byte(marshalObject(r, mutated)), &generic)
		if !assert.ErrorIs(t, got, ErrRepeatedKey, "seed %d: %s", seed, marshalObject(r, mutated)) {
			return
		}
	}
	// The typed requests, with a repeated key at each of their levels.
	for _, body := range []string{
		`{"id":"a","node":"n","fault_id":"f","gpu_uuid":"G","gpu_uuid":"H"}`,
		`{"id":"a","node":"n","fault_id":"f","gpus":["G"],"checks":[{"check":"dcgm_diag","level":1,"Level":3}]}`,
		`{"id":"a","node":"n","Node":"m","fault_id":"f","checks":[]}`,
	} {
		var vr VerifyRequest
		var gr GPUResetRequest
		assert.ErrorIs(t, DecodeStrict([]byte(body), &vr), ErrRepeatedKey, body)
		assert.ErrorIs(t, DecodeStrict([]byte(body), &gr), ErrRepeatedKey, body)
	}
}

// obj is an ordered JSON object that may hold a key twice.
type obj struct {
	keys []string
	vals []any
}

func genValue(r *rand.Rand) *obj {
	return genObject(r, 0)
}

func genObject(r *rand.Rand, depth int) *obj {
	o := &obj{}
	n := r.IntN(5)
	if depth == 0 {
		n++
	}
	seen := map[string]bool{}
	for len(o.keys) < n {
		k := []string{"id", "node", "fault_id", "gpu_uuid", "gpus", "checks", "check", "level", "window", "x" + strconv.Itoa(r.IntN(9))}[r.IntN(10)]
		if seen[strings.ToLower(k)] {
			continue
		}
		seen[strings.ToLower(k)] = true
		o.keys = append(o.keys, k)
		o.vals = append(o.vals, genAny(r, depth+1))
	}
	return o
}

func genAny(r *rand.Rand, depth int) any {
	if depth > 4 {
		return "s"
	}
	switch r.IntN(5) {
	case 0:
		return genObject(r, depth)
	case 1:
		a := make([]any, r.IntN(3))
		for i := range a {
			a[i] = genAny(r, depth+1)
		}
		return a
	case 2:
		return r.IntN(100)
	case 3:
		return nil
	default:
		return "v" + strconv.Itoa(r.IntN(100))
	}
}

// objects lists every object in v, depth first.
func objects(v any, out []*obj) []*obj {
	switch x := v.(type) {
	case *obj:
		out = append(out, x)
		for _, c := range x.vals {
			out = objects(c, out)
		}
	case []any:
		for _, c := range x {
			out = objects(c, out)
		}
	}
	return out
}

// repeatKey returns a copy of v (sharing nothing it changes) where one
// object has one of its keys a second time, maybe in another case.
func repeatKey(r *rand.Rand, v *obj) (*obj, bool) {
	c := clone(v).(*obj)
	var candidates []*obj
	for _, o := range objects(c, nil) {
		if len(o.keys) > 0 {
			candidates = append(candidates, o)
		}
	}
	if len(candidates) == 0 {
		return nil, false
	}
	o := candidates[r.IntN(len(candidates))]
	i := r.IntN(len(o.keys))
	k := o.keys[i]
	if r.IntN(2) == 0 {
		k = strings.ToUpper(k)
	}
	var val any = o.vals[i]
	if r.IntN(2) == 0 {
		val = "other"
	}
	at := r.IntN(len(o.keys) + 1)
	o.keys = append(o.keys[:at], append([]string{k}, o.keys[at:]...)...)
	o.vals = append(o.vals[:at], append([]any{val}, o.vals[at:]...)...)
	return c, true
}

func clone(v any) any {
	switch x := v.(type) {
	case *obj:
		c := &obj{keys: append([]string(nil), x.keys...)}
		for _, val := range x.vals {
			c.vals = append(c.vals, clone(val))
		}
		return c
	case []any:
		c := make([]any, len(x))
		for i, val := range x {
			c[i] = clone(val)
		}
		return c
	}
	return v
}

func marshalObject(r *rand.Rand, v any) string {
	var b strings.Builder
	write(&b, r, v)
	return b.String()
}

func write(b *strings.Builder, r *rand.Rand, v any) {
	ws := func() {
		if r.IntN(4) == 0 {
			b.WriteString([]string{" ", "\n", "\t"}[r.IntN(3)])
		}
	}
	switch x := v.(type) {
	case *obj:
		b.WriteByte('{')
		for i, k := range x.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			ws()
			kb, _ := json.Marshal(k)
			b.Write(kb)
			ws()
			b.WriteByte(':')
			write(b, r, x.vals[i])
		}
		ws()
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			write(b, r, e)
		}
		b.WriteByte(']')
	default:
		vb, _ := json.Marshal(x)
		b.Write(vb)
	}
}

// FuzzDecodeStrict: any input is refused or decoded, never a panic; what
// is accepted is valid JSON whose objects name no key twice.
func FuzzDecodeStrict(f *testing.F) {
	for _, s := range []string{
		`{"id":"a","node":"n","fault_id":"f","checks":[{"check":"dcgm_diag","level":2}]}`,
		`{"id":"a","id":"b"}`, `{"checks":[{"check":"x","CHECK":"y"}]}`, `[]`, `{"a":{"b":{"c":[1,{"d":2,"d":3}]}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var vr VerifyRequest
		if DecodeStrict(data, &vr) == nil && !json.Valid(data) {
			t.Fatalf("accepted invalid JSON %q", data)
		}
		var generic any
		if DecodeStrict(data, &generic) == nil {
			if !json.Valid(data) {
				t.Fatalf("accepted invalid JSON %q", data)
			}
			if checkKeys(data) != nil {
				t.Fatalf("accepted %q with a repeated key", data)
			}
		}
	})
}
