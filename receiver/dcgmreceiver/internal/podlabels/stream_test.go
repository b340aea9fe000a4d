package podlabels

import (
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// values reads all the values of in, "!" for one over the bound.
func values(t *testing.T, in string, max int) ([]string, error) {
	t.Helper()
	v := newValueReader(strings.NewReader(in), max)
	var out []string
	for {
		raw, over, err := v.next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		if over {
			out = append(out, "!")
			continue
		}
		out = append(out, string(raw))
		assert.LessOrEqual(t, cap(v.buf), 2*max+64, "the buffer stays bounded")
	}
}

func TestValueReaderSplitsValues(t *testing.T) {
	got, err := values(t, `{"type":"ADDED","object":{"a":"}\"{["}}`+"\n"+` {"b":[1,{"c":null}]}{"d":"\\"}  "s" 12 true null []`, 1<<10)
	require.NoError(t, err)
	assert.Equal(t, []string{`{"type":"ADDED","object":{"a":"}\"{["}}`, `{"b":[1,{"c":null}]}`, `{"d":"\\"}`,
		`"s"`, `12`, `true`, `null`, `[]`}, got)
}

// A value over the bound is read to its end, not kept, and the next value
// is read: a long string, deep nesting, many small members.
func TestValueReaderOverBound(t *testing.T) {
	const max = 64
	for name, big := range map[string]string{
		"string":  `{"s":"` + strings.Repeat("x", 10*max) + `"}`,
		"escapes": `{"s":"` + strings.Repeat(`\"`, 10*max) + `"}`,
		"nested":  strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
		"members": "{" + strings.Repeat(`"k":1,`, 100) + `"k":1}`,
	} {
		t.Run(name, func(t *testing.T) {
			got, err := values(t, `{"a":1}`+big+`{"b":2}`, max)
			require.NoError(t, err)
			assert.Equal(t, []string{`{"a":1}`, "!", `{"b":2}`}, got)
		})
	}
	got, err := values(t, strings.Repeat("x", 10*max)+" 1", max)
	require.NoError(t, err)
	assert.Equal(t, []string{"!", "1"}, got, "a long scalar")

	// Exactly at the bound: kept.
	at := `{"s":"` + strings.Repeat("x", max-8) + `"}`
	require.Len(t, at, max)
	got, err = values(t, at, max)
	require.NoError(t, err)
	assert.Equal(t, []string{at}, got)
}

func TestValueReaderBrokenStreams(t *testing.T) {
	for in, want := range map[string]error{
		`{"a":1`:       io.ErrUnexpectedEOF,
		`{"a":"open`:   io.ErrUnexpectedEOF,
		`{"a":1}}`:     errSyntax,
		`{"a":1},{}`:   errSyntax,
		`:`:            errSyntax,
		`["x"`:         io.ErrUnexpectedEOF,
		`"\`:           io.ErrUnexpectedEOF,
		`{"a":1}]`:     errSyntax,
		`{}` + "\n\n]": errSyntax,
	} {
		_, err := values(t, in, 1<<10)
		assert.ErrorIs(t, err, want, in)
	}
}

// A stream that never ends one value: bounded memory, read to the end.
func TestValueReaderEndlessValue(t *testing.T) {
	const max = 4 << 10
	r := io.MultiReader(strings.NewReader(`{"type":"ADDED","object":{"metadata":{"name":"`),
		io.LimitReader(repeatReader('z'), 8<<20))
	v := newValueReader(r, max)
	_, _, err := v.next()
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
	assert.LessOrEqual(t, cap(v.buf), 2*max)
}

type repeatReader byte

func (b repeatReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(b)
	}
	return len(p), nil
}

func list(t *testing.T, in string, max int) (listMeta, []string, error) {
	t.Helper()
	var items []string
	meta, err := readList(newValueReader(strings.NewReader(in), max), func(raw []byte) error {
		if raw == nil {
			items = append(items, "!")
		} else {
			var o object
			require.NoError(t, json.Unmarshal(raw, &o))
			items = append(items, o.Metadata.Namespace+"/"+o.Metadata.Name)
		}
		return nil
	})
	return meta, items, err
}

func TestReadList(t *testing.T) {
	meta, items, err := list(t, `{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1",
		"metadata":{"resourceVersion":"42","continue":"next"},
		"items":[{"metadata":{"namespace":"a","name":"p1","labels":{"x":"y"}}},
		         {"metadata":{"namespace":"a","name":"big","annotations":{"blob":"`+strings.Repeat("x", 300)+`"}}},
		         {"kind":"Pod","metadata":{"namespace":"b","name":"p2"},"spec":{"nodeName":"n"},"status":{}}],
		"extra":{"ignored":[1,2,3]}}`, 200)
	require.NoError(t, err)
	assert.Equal(t, listMeta{ResourceVersion: "42", Continue: "next"}, meta)
	assert.Equal(t, []string{"a/p1", "!", "b/p2"}, items)

	meta, items, err = list(t, `{"items":null,"metadata":{"resourceVersion":"7"}}`, 200)
	require.NoError(t, err)
	assert.Equal(t, "7", meta.ResourceVersion)
	assert.Empty(t, items)

	for _, bad := range []string{
		`[]`,
		`{"items":[{"metadata":{}} {"metadata":{}}]}`,
		`{"items":{}}`,
		`{"metadata":{"resourceVersion":"` + strings.Repeat("9", 300) + `"}}`,
		`{"metadata":{"resourceVersion":1}}`,
		`{"items":[],`,
		`{"items" []}`,
		`{1:2}`,
	} {
		_, _, err := list(t, bad, 200)
		assert.Error(t, err, bad)
	}

	// The item callback's error ends the list.
	stop := errors.New("stop")
	_, err = readList(newValueReader(strings.NewReader(`{"items":[{},{}]}`), 100), func([]byte) error { return stop })
	assert.ErrorIs(t, err, stop)
}

// The events as the API server writes them, ERROR's Status included.
func TestWatchEventDecoding(t *testing.T) {
	var ev watchEvent
	require.NoError(t, json.Unmarshal([]byte(`{"type":"MODIFIED","object":{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1",
		"metadata":{"name":"p","namespace":"ns","uid":"u","resourceVersion":"9","labels":{"a":"b"},"annotations":{"x":"y"},"managedFields":[{}]}}}`), &ev))
	assert.Equal(t, watchEvent{Type: "MODIFIED", Object: object{Metadata: objectMeta{Namespace: "ns", Name: "p", UID: "u",
		ResourceVersion: "9", Labels: map[string]string{"a": "b"}}}}, ev)
	ev = watchEvent{}
	require.NoError(t, json.Unmarshal([]byte(`{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},
		"status":"Failure","message":"too old resource version: 1 (5)","reason":"Expired","code":410}}`), &ev))
	assert.Equal(t, object{Code: 410, Reason: "Expired", Message: "too old resource version: 1 (5)"}, ev.Object)
}
