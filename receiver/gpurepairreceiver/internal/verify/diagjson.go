package verify

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// MaxDiagOutput bounds the diagnostic output the parser reads (and the
// command backend keeps): a full level-4 run of an 8-GPU node writes well
// under 1 MiB.
const MaxDiagOutput = 4 << 20

// Bounds of the JSON the parser accepts, beyond its size.
const (
	maxJSONDepth   = 32   // dcgmi's document nests 7 deep
	maxPrefixBytes = 4096 // text a tool may print before the document
	maxGPUID       = 1 << 16
)

// ParseDiagJSON reads the JSON document `dcgmi diag -j` writes: DCGM 4's
// ("DCGM Diagnostic" with entity results) and DCGM 3's ("DCGM GPU
// Diagnostic" with gpu_ids). It is strict about everything that decides
// pass or fail: an unknown result word, a result with no status, a test
// with no name, a document with no test, a duplicated key and a
// runtime_error (the run did not happen) are errors naming the field; text
// after the document is an error. Lines of text before the document (a
// banner) are skipped, up to 4 KiB. It reads at most MaxDiagOutput bytes;
// its time and memory grow linearly with the input.
func ParseDiagJSON(data []byte) (*DiagReport, error) {
	if len(data) > MaxDiagOutput {
		return nil, fmt.Errorf("diagnostic output is %d bytes, more than the %d the parser reads", len(data), MaxDiagOutput)
	}
	doc, err := skipBanner(data)
	if err != nil {
		return nil, err
	}
	if err := checkJSONShape(doc); err != nil {
		return nil, err
	}
	var raw rawDiagDoc
	if err := json.Unmarshal(doc, &raw); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, fmt.Errorf("field %s: a JSON %s where DCGM writes %s", te.Field, te.Value, te.Type)
		}
		return nil, fmt.Errorf("diagnostic JSON: %w", err)
	}
	return raw.report()
}

// skipBanner returns data from its JSON document on: after leading
// whitespace, the document must start the data or a line within its first
// maxPrefixBytes bytes.
func skipBanner(data []byte) ([]byte, error) {
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	if len(trimmed) == 0 {
		return nil, errors.New("diagnostic output is empty: no JSON document")
	}
	if trimmed[0] == '{' {
		return trimmed, nil
	}
	head := trimmed[:min(len(trimmed), maxPrefixBytes)]
	i := bytes.Index(head, []byte("\n{"))
	if i < 0 {
		return nil, fmt.Errorf("diagnostic output does not start with a JSON object (it starts %q)", truncateUTF8(string(head[:min(len(head), 80)]), 80))
	}
	return trimmed[i+1:], nil
}

// checkJSONShape walks the document's tokens once: one object, nothing but
// whitespace after it, nesting at most maxJSONDepth, and no key twice in an
// object (compared without case, as encoding/json matches keys, so no
// second "status" can overrule the first). The path of a bad token is built
// only for the error, so the walk stays linear in the input.
func checkJSONShape(doc []byte) error {
	type frame struct {
		object  bool
		wantKey bool
		keys    map[string]struct{}
		key     string // objects: the key whose value comes next
		index   int    // arrays: the next element's index
	}
	var stack []frame
	path := func() string {
		var b strings.Builder
		b.WriteString("$")
		for _, f := range stack {
			if f.object {
				b.WriteString(".")
				b.WriteString(truncateUTF8(f.key, 64))
			} else {
				fmt.Fprintf(&b, "[%d]", f.index)
			}
		}
		return b.String()
	}
	valueDone := func() {
		if len(stack) == 0 {
			return
		}
		top := &stack[len(stack)-1]
		if top.object {
			top.wantKey = true
		} else {
			top.index++
		}
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return fmt.Errorf("diagnostic JSON ends inside %s (truncated)", path())
		}
		if err != nil {
			return fmt.Errorf("diagnostic JSON, at %s: %w", path(), err)
		}
		n := len(stack)
		if n > 0 && stack[n-1].object && stack[n-1].wantKey {
			top := &stack[n-1]
			if tok == json.Delim('}') {
				stack = stack[:n-1]
				if len(stack) == 0 {
					return checkTrailer(doc, dec)
				}
				valueDone()
				continue
			}
			key, _ := tok.(string) // the decoder yields only strings here
			folded := strings.ToLower(key)
			if _, dup := top.keys[folded]; dup {
				top.key = key
				return fmt.Errorf("diagnostic JSON: key %q appears twice in %s", truncateUTF8(key, 64), path())
			}
			top.keys[folded] = struct{}{}
			top.key, top.wantKey = key, false
			continue
		}
		if n == 0 && tok != json.Delim('{') {
			return errors.New("diagnostic output is not a JSON object")
		}
		switch tok {
		case json.Delim(']'):
			stack = stack[:n-1]
			if len(stack) == 0 {
				return checkTrailer(doc, dec)
			}
			valueDone()
			continue
		case json.Delim('{'), json.Delim('['):
			if n >= maxJSONDepth {
				return fmt.Errorf("diagnostic JSON nests deeper than %d at %s", maxJSONDepth, path())
			}
			f := frame{object: tok == json.Delim('{')}
			if f.object {
				f.wantKey, f.keys = true, map[string]struct{}{}
			}
			stack = append(stack, f)
			continue
		}
		valueDone()
	}
}

// checkTrailer refuses anything but whitespace after the document.
func checkTrailer(doc []byte, dec *json.Decoder) error {
	offset := dec.InputOffset()
	if extra := bytes.TrimLeft(doc[offset:], " \t\r\n"); len(extra) > 0 {
		return fmt.Errorf("diagnostic output has %d bytes after its JSON document (at byte %d): one document expected", len(extra), offset)
	}
	return nil
}

// The document as dcgmi writes it (DCGM's nvvs/include/NvvsJsonStrings.h
// names the keys). Pointers tell an absent field from an empty one.
type rawDiagDoc struct {
	V4       *rawDiag     `json:"DCGM Diagnostic"`
	V3       *rawDiag     `json:"DCGM GPU Diagnostic"`
	Metadata *rawMetadata `json:"metadata"`
}

type rawMetadata struct {
	Version *string `json:"version"`
}

type rawDiag struct {
	Categories   *[]rawCategory `json:"test_categories"`
	RuntimeError *string        `json:"runtime_error"`
	Version      *string        `json:"version"`
}

type rawCategory struct {
	Category *string    `json:"category"`
	Tests    *[]rawTest `json:"tests"`
}

type rawTest struct {
	Name    *string      `json:"name"`
	Results *[]rawResult `json:"results"`
	Summary *rawResult   `json:"test_summary"`
}

type rawResult struct {
	EntityGroup   *string         `json:"entity_group"`
	EntityGroupID *int64          `json:"entity_group_id"`
	EntityID      *int64          `json:"entity_id"`
	GPUIDs        json.RawMessage `json:"gpu_ids"`
	GPUID         json.RawMessage `json:"gpu_id"`
	Status        *string         `json:"status"`
	Warnings      json.RawMessage `json:"warnings"`
}

type rawWarning struct {
	Warning *string `json:"warning"`
	ErrorID *int64  `json:"error_id"`
}

// dcgmEntityGroupGPU is DCGM_FE_GPU, the entity group id of a GPU.
const dcgmEntityGroupGPU = 1

func (d *rawDiagDoc) report() (*DiagReport, error) {
	root, name := d.V4, "DCGM Diagnostic"
	switch {
	case d.V4 != nil && d.V3 != nil:
		return nil, errors.New(`diagnostic JSON has both "DCGM Diagnostic" and "DCGM GPU Diagnostic": one document expected`)
	case d.V3 != nil:
		root, name = d.V3, "DCGM GPU Diagnostic"
	case d.V4 == nil:
		return nil, errors.New(`diagnostic JSON has no "DCGM Diagnostic" (DCGM 4) or "DCGM GPU Diagnostic" (DCGM 3) object`)
	}
	if root.RuntimeError != nil {
		return nil, fmt.Errorf("%s.runtime_error: the diagnostic did not run: %s", name, truncateUTF8(*root.RuntimeError, maxMessageBytes))
	}
	if root.Categories == nil {
		return nil, fmt.Errorf("%s.test_categories is missing: no test list is not a pass", name)
	}
	rep := &DiagReport{}
	switch {
	case d.Metadata != nil && d.Metadata.Version != nil:
		rep.Version = *d.Metadata.Version
	case root.Version != nil:
		rep.Version = *root.Version
	}
	for ci, c := range *root.Categories {
		cpath := fmt.Sprintf("%s.test_categories[%d]", name, ci)
		if c.Tests == nil {
			return nil, fmt.Errorf("%s.tests is missing", cpath)
		}
		category := ""
		if c.Category != nil {
			category = *c.Category
		}
		for ti, t := range *c.Tests {
			tpath := fmt.Sprintf("%s.tests[%d]", cpath, ti)
			test, err := t.test(tpath, category)
			if err != nil {
				return nil, err
			}
			rep.Tests = append(rep.Tests, test)
		}
	}
	if len(rep.Tests) == 0 {
		return nil, fmt.Errorf("%s.test_categories lists no test: no test is not a pass", name)
	}
	return rep, nil
}

func (t *rawTest) test(path, category string) (DiagTest, error) {
	if t.Name == nil || strings.TrimSpace(*t.Name) == "" {
		return DiagTest{}, fmt.Errorf("%s.name is missing or empty", path)
	}
	test := DiagTest{Name: truncateUTF8(*t.Name, 128), Category: truncateUTF8(category, 128)}
	if t.Summary != nil {
		s, msgs, err := t.Summary.statusAndMessages(path + ".test_summary")
		if err != nil {
			return DiagTest{}, err
		}
		test.Summary, test.SummaryMessages = s, msgs
	}
	if t.Results == nil {
		if t.Summary == nil {
			return DiagTest{}, fmt.Errorf("%s has neither results nor test_summary", path)
		}
		return test, nil
	}
	for ri, r := range *t.Results {
		rpath := fmt.Sprintf("%s.results[%d]", path, ri)
		status, msgs, err := r.statusAndMessages(rpath)
		if err != nil {
			return DiagTest{}, err
		}
		ids, err := r.gpuIDs(rpath)
		if err != nil {
			return DiagTest{}, err
		}
		base := DiagEntityResult{Status: status, Messages: msgs}
		switch {
		case ids != nil:
			for _, id := range ids {
				res := base
				res.GPU, res.EntityGroup, res.EntityID = true, "GPU", id
				test.Results = append(test.Results, res)
			}
		case r.EntityID == nil && r.EntityGroup == nil && r.EntityGroupID == nil:
			base.AllGPUs = true
			test.Results = append(test.Results, base)
		default:
			res, err := r.entity(rpath, base)
			if err != nil {
				return DiagTest{}, err
			}
			test.Results = append(test.Results, res)
		}
	}
	return test, nil
}

func (r *rawResult) statusAndMessages(path string) (DiagStatus, []string, error) {
	if r.Status == nil {
		return "", nil, fmt.Errorf("%s.status is missing: no status is not a pass", path)
	}
	s, ok := parseDiagStatus(*r.Status)
	if !ok {
		return "", nil, fmt.Errorf("%s.status: unknown result %q (want Pass, Fail, Warn, Skip or Not Run): an unknown result is not a pass", path, truncateUTF8(*r.Status, 64))
	}
	msgs, err := parseWarnings(r.Warnings, path+".warnings")
	return s, msgs, err
}

// parseWarnings reads DCGM's warnings: a list of objects with a "warning"
// (DCGM 3.1 and later), a list of strings, or one string (older).
func parseWarnings(raw json.RawMessage, path string) ([]string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return []string{truncateUTF8(s, maxMessageBytes)}, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, fmt.Errorf("%s: a list of warnings expected: %w", path, err)
	}
	var out []string
	for i, it := range items {
		if len(out) == maxMessagesJoined+1 {
			out = append(out, fmt.Sprintf("(%d more warnings)", len(items)-i))
			break
		}
		it = bytes.TrimSpace(it)
		if len(it) > 0 && it[0] == '"' {
			var s string
			if err := json.Unmarshal(it, &s); err != nil {
				return nil, fmt.Errorf("%s[%d]: %w", path, i, err)
			}
			out = append(out, truncateUTF8(s, maxMessageBytes))
			continue
		}
		var w rawWarning
		if err := json.Unmarshal(it, &w); err != nil {
			return nil, fmt.Errorf("%s[%d]: a warning object or string expected: %w", path, i, err)
		}
		switch {
		case w.Warning != nil:
			out = append(out, truncateUTF8(*w.Warning, maxMessageBytes))
		case w.ErrorID != nil:
			out = append(out, "DCGM error id "+strconv.FormatInt(*w.ErrorID, 10))
		}
	}
	return out, nil
}

// gpuIDs reads DCGM 3's gpu_ids (or dcgmi's gpu_id): "0", "0,1", 0 or
// [0, 1]. nil when neither is present.
func (r *rawResult) gpuIDs(path string) ([]int, error) {
	raw, key := r.GPUIDs, "gpu_ids"
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		raw, key = r.GPUID, "gpu_id"
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	path += "." + key
	if r.EntityID != nil || r.EntityGroup != nil || r.EntityGroupID != nil {
		return nil, fmt.Errorf("%s: a result with both %s and entity_id is ambiguous", path, key)
	}
	var fields []string
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		fields = strings.Split(s, ",")
	case '[':
		var items []json.Number
		if err := json.Unmarshal(raw, &items); err != nil {
			return nil, fmt.Errorf("%s: a list of GPU ids expected: %w", path, err)
		}
		for _, it := range items {
			fields = append(fields, it.String())
		}
	default:
		fields = []string{string(raw)}
	}
	ids := make([]int, 0, len(fields))
	for _, f := range fields {
		id, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || id < 0 || id >= maxGPUID {
			return nil, fmt.Errorf("%s: %q is not a GPU id", path, truncateUTF8(f, 32))
		}
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("%s names no GPU", path)
	}
	return ids, nil
}

// entity reads DCGM 4's entity_group, entity_group_id and entity_id.
func (r *rawResult) entity(path string, res DiagEntityResult) (DiagEntityResult, error) {
	if r.EntityID == nil {
		return res, fmt.Errorf("%s.entity_id is missing: the result names an entity group but no entity", path)
	}
	if r.EntityGroup == nil && r.EntityGroupID == nil {
		return res, fmt.Errorf("%s: entity_id without entity_group or entity_group_id", path)
	}
	id := *r.EntityID
	if id < 0 || id > 1<<31-1 {
		return res, fmt.Errorf("%s.entity_id: %d is out of range", path, id)
	}
	byName := r.EntityGroup != nil && strings.EqualFold(strings.TrimSpace(*r.EntityGroup), "GPU")
	byID := r.EntityGroupID != nil && *r.EntityGroupID == dcgmEntityGroupGPU
	if r.EntityGroup != nil && r.EntityGroupID != nil && byName != byID {
		return res, fmt.Errorf("%s: entity_group %q and entity_group_id %d disagree", path, truncateUTF8(*r.EntityGroup, 32), *r.EntityGroupID)
	}
	res.GPU = byName || byID
	res.EntityID = int(id)
	switch {
	case res.GPU:
		if id >= maxGPUID {
			return res, fmt.Errorf("%s.entity_id: %d is not a GPU id", path, id)
		}
		res.EntityGroup = "GPU"
	case r.EntityGroup != nil:
		res.EntityGroup = truncateUTF8(*r.EntityGroup, 32)
	default:
		res.EntityGroup = "entity group " + strconv.FormatInt(*r.EntityGroupID, 10)
	}
	return res, nil
}
