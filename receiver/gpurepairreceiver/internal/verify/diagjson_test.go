package verify

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/internal/repair"
)

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	return b
}

func gpusN(n int) ([]GPU, []int) {
	gpus := make([]GPU, n)
	ids := make([]int, n)
	for i := range gpus {
		gpus[i] = GPU{UUID: "GPU-" + string(rune('a'+i)), Index: i}
		ids[i] = i
	}
	return gpus, ids
}

func evaluate(t *testing.T, doc []byte, n int, opts DiagOptions) []repair.CheckResult {
	t.Helper()
	rep, err := ParseDiagJSON(doc)
	require.NoError(t, err)
	gpus, ids := gpusN(n)
	return rep.Evaluate(1, gpus, ids, opts)
}

func TestParseDiagJSONRealDCGM3(t *testing.T) {
	for _, name := range []string{"dcgm3_r2_pass_virtualclient.json", "dcgm3_r3_pass_virtualclient.json"} {
		t.Run(name, func(t *testing.T) {
			rep, err := ParseDiagJSON(readFixture(t, name))
			require.NoError(t, err)
			assert.Equal(t, "Denylist", rep.Tests[0].Name)
			assert.True(t, rep.Tests[0].Results[0].AllGPUs, "a deployment result without gpu_ids holds for every GPU")
			res := rep.Evaluate(2, []GPU{{UUID: "GPU-0", Index: 0}}, []int{0}, DiagOptions{})
			require.Len(t, res, 1)
			assert.True(t, res[0].Passed, res[0].Detail)
			assert.Equal(t, string(repair.CheckDiag), res[0].Check)
			assert.Equal(t, "GPU-0", res[0].GPU)
		})
	}
	// The r3 run skipped the EUD test: not applicable, not a failure, and
	// listed only when DCGM says why (it does not here).
	res := evaluate(t, readFixture(t, "dcgm3_r3_pass_virtualclient.json"), 1, DiagOptions{})
	assert.True(t, res[0].Passed)
	assert.Empty(t, res[0].Tests)
}

func TestParseDiagJSONDCGM4Issue215(t *testing.T) {
	res := evaluate(t, readFixture(t, "dcgm4_r3_diagnostic_pass_issue215.json"), 8, DiagOptions{})
	for _, r := range res {
		assert.True(t, r.Passed, r.Detail)
	}
	// A GPU the run does not name fails.
	rep, err := ParseDiagJSON(readFixture(t, "dcgm4_r3_diagnostic_pass_issue215.json"))
	require.NoError(t, err)
	res = rep.Evaluate(3, []GPU{{UUID: "GPU-x", Index: 8}}, []int{8}, DiagOptions{})
	assert.False(t, res[0].Passed)
	assert.Contains(t, res[0].Detail, "no result")
}

func TestParseDiagJSONDCGM4Fail(t *testing.T) {
	rep, err := ParseDiagJSON(readFixture(t, "dcgm4_r2_memory_fail.json"))
	require.NoError(t, err)
	assert.Equal(t, "4.2.3", rep.Version)
	res := rep.Evaluate(2, []GPU{{UUID: "GPU-a", Index: 0}, {UUID: "GPU-b", Index: 1}}, []int{0, 1}, DiagOptions{})
	assert.True(t, res[0].Passed, res[0].Detail)
	assert.False(t, res[1].Passed)
	require.Len(t, res[1].Tests, 1, "a skip DCGM gives no reason for is not listed")
	assert.Equal(t, repair.TestResult{Name: "memory", Result: "fail",
		Info: "A memory mismatch was detected on GPU 1, but no error was reported by CUDA or NVML."}, res[1].Tests[0])
	// The memory test's summary is Fail because GPU 1 failed: it does not
	// fail GPU 0, whose own result passed.
	assert.Contains(t, res[1].Detail, "1 of 3 results did not pass")
}

func TestParseDiagJSONRuntimeError(t *testing.T) {
	_, err := ParseDiagJSON(readFixture(t, "dcgm4_runtime_error.json"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "runtime_error")
	assert.Contains(t, err.Error(), "in use by another process")
}

// Every truncation of every sample is refused: a cut document never
// passes a GPU.
func TestParseDiagJSONTruncations(t *testing.T) {
	entries, err := os.ReadDir("testdata")
	require.NoError(t, err)
	n := 0
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		doc := readFixture(t, e.Name())
		end := len(strings.TrimRight(string(doc), " \t\r\n"))
		for i := range end {
			rep, err := ParseDiagJSON(doc[:i])
			if !assert.Error(t, err, "%s cut at %d of %d parsed", e.Name(), i, len(doc)) {
				t.Logf("report: %+v", rep)
				return
			}
			n++
		}
	}
	assert.Greater(t, n, 5000)
}

func TestParseDiagJSONRefuses(t *testing.T) {
	const gpuResult = `{"entity_group":"GPU","entity_group_id":1,"entity_id":0,"status":"Pass"}`
	wrap := func(result string) string {
		return `{"DCGM Diagnostic":{"test_categories":[{"category":"Hardware","tests":[{"name":"memory","results":[` + result + `]}]}]}}`
	}
	for _, c := range []struct {
		name, doc, want string
	}{
		{"empty", "", "empty"},
		{"blank", " \n\t ", "empty"},
		{"not json", "Error: unable to connect to host engine", "does not start with a JSON object"},
		{"array", `[{"DCGM Diagnostic":{}}]`, "does not start with a JSON object"},
		{"array after banner", "banner\n" + `{"DCGM Diagnostic":{}}` + "\n[1]", "after its JSON document"},
		{"no root", `{"metadata":{"version":"4.2.3"}}`, `no "DCGM Diagnostic"`},
		{"both roots", `{"DCGM Diagnostic":{"test_categories":[]},"DCGM GPU Diagnostic":{"test_categories":[]}}`, "both"},
		{"no test list", `{"DCGM Diagnostic":{}}`, "test_categories is missing"},
		{"empty test list", `{"DCGM Diagnostic":{"test_categories":[]}}`, "lists no test"},
		{"category without tests", `{"DCGM Diagnostic":{"test_categories":[{"category":"Hardware"}]}}`, "test_categories[0].tests is missing"},
		{"category with no test", `{"DCGM Diagnostic":{"test_categories":[{"category":"Hardware","tests":[]}]}}`, "lists no test"},
		{"test without name", `{"DCGM Diagnostic":{"test_categories":[{"category":"Hardware","tests":[{"results":[` + gpuResult + `]}]}]}}`, "tests[0].name is missing"},
		{"test without results or summary", `{"DCGM Diagnostic":{"test_categories":[{"category":"Hardware","tests":[{"name":"memory"}]}]}}`, "neither results nor test_summary"},
		{"unknown status", wrap(`{"entity_group":"GPU","entity_group_id":1,"entity_id":0,"status":"Inconclusive"}`), `results[0].status: unknown result "Inconclusive"`},
		{"empty status", wrap(`{"entity_group":"GPU","entity_group_id":1,"entity_id":0,"status":""}`), "unknown result"},
		{"missing status", wrap(`{"entity_group":"GPU","entity_group_id":1,"entity_id":0}`), "results[0].status is missing"},
		{"null status", wrap(`{"entity_group":"GPU","entity_group_id":1,"entity_id":0,"status":null}`), "status is missing"},
		{"status a number", wrap(`{"entity_group":"GPU","entity_group_id":1,"entity_id":0,"status":1}`), "field DCGM Diagnostic.test_categories.tests.results.status"},
		{"entity id a string", wrap(`{"entity_group":"GPU","entity_group_id":1,"entity_id":"0","status":"Pass"}`), "entity_id"},
		{"entity id fraction", wrap(`{"entity_group":"GPU","entity_group_id":1,"entity_id":0.5,"status":"Pass"}`), "entity_id"},
		{"entity id negative", wrap(`{"entity_group":"GPU","entity_group_id":1,"entity_id":-1,"status":"Pass"}`), "out of range"},
		{"entity group disagrees", wrap(`{"entity_group":"CPU","entity_group_id":1,"entity_id":0,"status":"Pass"}`), "disagree"},
		{"entity without id", wrap(`{"entity_group":"GPU","entity_group_id":1,"status":"Pass"}`), "entity_id is missing"},
		{"entity id without group", wrap(`{"entity_id":0,"status":"Pass"}`), "without entity_group"},
		{"gpu_ids and entity", wrap(`{"gpu_ids":"0","entity_group":"GPU","entity_group_id":1,"entity_id":0,"status":"Pass"}`), "ambiguous"},
		{"gpu_ids not ids", wrap(`{"gpu_ids":"zero","status":"Pass"}`), `"zero" is not a GPU id`},
		{"gpu_ids empty", wrap(`{"gpu_ids":"","status":"Pass"}`), "is not a GPU id"},
		{"gpu_ids object", wrap(`{"gpu_ids":{},"status":"Pass"}`), "is not a GPU id"},
		{"warnings a number", wrap(`{"entity_group":"GPU","entity_group_id":1,"entity_id":0,"status":"Fail","warnings":7}`), "warnings"},
		{"duplicate status", wrap(`{"entity_group":"GPU","entity_group_id":1,"entity_id":0,"status":"Fail","status":"Pass"}`), `key "status" appears twice in $.DCGM Diagnostic.test_categories[0].tests[0].results[0]`},
		{"duplicate status other case", wrap(`{"entity_group":"GPU","entity_group_id":1,"entity_id":0,"status":"Fail","Status":"Pass"}`), "appears twice"},
		{"trailing document", wrap(gpuResult) + `{"DCGM Diagnostic":{}}`, "after its JSON document"},
		{"trailing garbage", wrap(gpuResult) + "\nx", "after its JSON document"},
		{"deep", strings.Repeat(`{"a":`, 40) + "1" + strings.Repeat("}", 40), "nests deeper"},
		{"runtime error", `{"DCGM Diagnostic":{"runtime_error":"nvvs failed","test_categories":[]}}`, "did not run: nvvs failed"},
		{"summary without status", `{"DCGM Diagnostic":{"test_categories":[{"category":"Hardware","tests":[{"name":"memory","results":[` + gpuResult + `],"test_summary":{}}]}]}}`, "test_summary.status is missing"},
		{"too big", `{"DCGM Diagnostic":{"runtime_error":"` + strings.Repeat("x", MaxDiagOutput) + `"}}`, "more than"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rep, err := ParseDiagJSON([]byte(c.doc))
			require.Error(t, err, "%+v", rep)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}

func TestParseDiagJSONBanner(t *testing.T) {
	doc := readFixture(t, "dcgm3_r2_pass_virtualclient.json")
	rep, err := ParseDiagJSON(append([]byte("Successfully ran diagnostic for group.\n"), doc...))
	require.NoError(t, err)
	assert.NotEmpty(t, rep.Tests)
	// A banner longer than 4 KiB is not skipped.
	_, err = ParseDiagJSON(append([]byte(strings.Repeat("x", 5000)+"\n"), doc...))
	assert.Error(t, err)
}

func TestParseDiagJSONGPUIDsForms(t *testing.T) {
	for _, ids := range []string{`"0,2"`, `" 0 , 2 "`, `[0,2]`} {
		doc := `{"DCGM GPU Diagnostic":{"test_categories":[{"category":"Hardware","tests":[{"name":"GPU Memory","results":[{"gpu_ids":` + ids + `,"status":"Pass"}]}]}]}}`
		res := evaluate(t, []byte(doc), 3, DiagOptions{})
		assert.True(t, res[0].Passed, ids)
		assert.False(t, res[1].Passed, ids)
		assert.True(t, res[2].Passed, ids)
	}
	doc := `{"DCGM GPU Diagnostic":{"test_categories":[{"category":"Hardware","tests":[{"name":"GPU Memory","results":[{"gpu_id":1,"status":"Pass"}]}]}]}}`
	res := evaluate(t, []byte(doc), 2, DiagOptions{})
	assert.False(t, res[0].Passed)
	assert.True(t, res[1].Passed)
}

func TestEvaluateVerdicts(t *testing.T) {
	gpuRes := func(id int, status string, warning string) string {
		w := ""
		if warning != "" {
			w = `,"warnings":[{"warning":"` + warning + `","error_id":3}]`
		}
		return `{"entity_group":"GPU","entity_group_id":1,"entity_id":` + string(rune('0'+id)) + `,"status":"` + status + `"` + w + `}`
	}
	doc := func(tests ...string) []byte {
		return []byte(`{"DCGM Diagnostic":{"test_categories":[{"category":"Hardware","tests":[` + strings.Join(tests, ",") + `]}]}}`)
	}
	test := func(name string, summary string, results ...string) string {
		s := `{"name":"` + name + `","results":[` + strings.Join(results, ",") + `]`
		if summary != "" {
			s += `,"test_summary":` + summary
		}
		return s + "}"
	}
	t.Run("warn fails unless allowed", func(t *testing.T) {
		d := doc(test("memory", "", gpuRes(0, "Pass", "")), test("targeted power", "", gpuRes(0, "Warn", "clocks throttled")))
		res := evaluate(t, d, 1, DiagOptions{})
		assert.False(t, res[0].Passed)
		assert.Equal(t, []repair.TestResult{{Name: "targeted power", Result: "warn", Info: "clocks throttled"}}, res[0].Tests)
		res = evaluate(t, d, 1, DiagOptions{AllowWarn: true})
		assert.True(t, res[0].Passed, res[0].Detail)
		assert.Len(t, res[0].Tests, 1, "an allowed warning is still listed")
	})
	t.Run("all skipped is no pass", func(t *testing.T) {
		res := evaluate(t, doc(test("eud", "", gpuRes(0, "Skip", ""))), 1, DiagOptions{})
		assert.False(t, res[0].Passed)
		assert.Contains(t, res[0].Detail, "no test passed")
	})
	t.Run("not run is no pass", func(t *testing.T) {
		res := evaluate(t, doc(test("memory", "", gpuRes(0, "Pass", "")), test("pcie", "", gpuRes(0, "Not Run", ""))), 1, DiagOptions{})
		assert.False(t, res[0].Passed)
	})
	t.Run("failing summary fails every GPU", func(t *testing.T) {
		d := doc(test("software", `{"status":"Fail","warnings":[{"warning":"the NVIDIA driver is missing"}]}`, gpuRes(0, "Pass", ""), gpuRes(1, "Fail", "own")))
		res := evaluate(t, d, 2, DiagOptions{})
		assert.False(t, res[0].Passed)
		assert.Equal(t, []repair.TestResult{{Name: "software", Result: "fail", Info: "the NVIDIA driver is missing"}}, res[0].Tests)
		assert.False(t, res[1].Passed)
		assert.Equal(t, []repair.TestResult{{Name: "software", Result: "fail", Info: "own"}}, res[1].Tests, "a GPU's own failure is listed once")
	})
	t.Run("failing summary explained by a GPU", func(t *testing.T) {
		d := doc(test("memory", `{"status":"Fail"}`, gpuRes(0, "Pass", ""), gpuRes(1, "Fail", "own")))
		res := evaluate(t, d, 2, DiagOptions{})
		assert.True(t, res[0].Passed, res[0].Detail)
		assert.False(t, res[1].Passed)
	})
	t.Run("failing summary explained by nothing", func(t *testing.T) {
		d := doc(test("memory", `{"status":"Fail"}`, gpuRes(0, "Pass", "")))
		res := evaluate(t, d, 1, DiagOptions{})
		assert.False(t, res[0].Passed)
		assert.Contains(t, res[0].Tests[0].Info, "summary is fail")
	})
	t.Run("failing other entity fails every GPU", func(t *testing.T) {
		d := doc(test("cpu eud", "", gpuRes(0, "Pass", ""), `{"entity_group":"CPU","entity_group_id":7,"entity_id":0,"status":"Fail","warnings":["cpu 0 broke"]}`))
		res := evaluate(t, d, 1, DiagOptions{})
		assert.False(t, res[0].Passed)
		assert.Contains(t, res[0].Tests[0].Info, "CPU 0: fail: cpu 0 broke")
	})
	t.Run("passing other entity changes nothing", func(t *testing.T) {
		d := doc(test("cpu eud", "", gpuRes(0, "Pass", ""), `{"entity_group":"CPU","entity_group_id":7,"entity_id":0,"status":"Pass"}`))
		res := evaluate(t, d, 1, DiagOptions{})
		assert.True(t, res[0].Passed)
	})
	t.Run("unknown to DCGM", func(t *testing.T) {
		rep, err := ParseDiagJSON(doc(test("memory", "", gpuRes(0, "Pass", ""))))
		require.NoError(t, err)
		res := rep.Evaluate(1, []GPU{{UUID: "GPU-z", Index: 0}}, []int{-1}, DiagOptions{})
		assert.False(t, res[0].Passed)
		assert.Contains(t, res[0].Detail, "DCGM does not list")
		res = rep.Evaluate(1, []GPU{{UUID: "GPU-a", Index: 0}, {UUID: "GPU-z", Index: 1}}, []int{0}, DiagOptions{})
		assert.True(t, res[0].Passed)
		assert.False(t, res[1].Passed, "no id: unknown to DCGM")
	})
	t.Run("results bounded", func(t *testing.T) {
		var tests []string
		for i := range 200 {
			tests = append(tests, test("t"+strings.Repeat("x", i%7)+string(rune('a'+i%26)), "", gpuRes(0, "Fail", strings.Repeat("w", 5000))))
		}
		res := evaluate(t, doc(tests...), 1, DiagOptions{})
		assert.False(t, res[0].Passed)
		assert.Len(t, res[0].Tests, maxTestsPerGPU)
		assert.Contains(t, res[0].Detail, "more results not listed")
		for _, tr := range res[0].Tests {
			assert.LessOrEqual(t, len(tr.Info), maxMessageBytes)
		}
	})
}

// FuzzParseDiagJSON: no input panics the parser; whatever parses evaluates
// without panicking, to one result per GPU; a GPU never passes without a
// "pass" in the input; and the parse allocates a bounded multiple of the
// input's size and keeps nothing.
func FuzzParseDiagJSON(f *testing.F) {
	entries, err := os.ReadDir("testdata")
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".json") {
			f.Add(readFixture(f, e.Name()))
		}
	}
	f.Add([]byte(`{"DCGM Diagnostic":{"test_categories":[{"category":"x","tests":[{"name":"m","results":[{"gpu_ids":"0,1","status":"Pass"}]}]}]}}`))
	f.Add([]byte(`{"DCGM GPU Diagnostic":{"test_categories":[{"tests":[{"name":"m","test_summary":{"status":"Fail"}}]}]}}`))
	gpus, ids := gpusN(4)
	f.Fuzz(func(t *testing.T, data []byte) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		rep, err := ParseDiagJSON(data)
		runtime.ReadMemStats(&after)
		if grown := after.TotalAlloc - before.TotalAlloc; grown > uint64(64*len(data))+1<<20 {
			t.Fatalf("parsing %d bytes allocated %d bytes", len(data), grown)
		}
		if err != nil {
			if rep != nil {
				t.Fatalf("an error with a report: %v", err)
			}
			return
		}
		res := rep.Evaluate(1, gpus, ids, DiagOptions{})
		if len(res) != len(gpus) {
			t.Fatalf("%d results for %d GPUs", len(res), len(gpus))
		}
		for _, r := range res {
			if r.Passed && !strings.Contains(strings.ToLower(string(data)), "pass") {
				t.Fatalf("GPU %s passed on input without a pass: %q", r.GPU, data)
			}
			if len(r.Tests) > maxTestsPerGPU {
				t.Fatalf("%d tests listed", len(r.Tests))
			}
		}
		runtime.GC()
		var kept runtime.MemStats
		runtime.ReadMemStats(&kept)
		if k := int64(kept.HeapAlloc) - int64(before.HeapAlloc); k > int64(64*len(data))+4<<20 {
			t.Fatalf("parsing %d bytes kept %d bytes on the heap", len(data), k)
		}
	})
}

// A document near the size bound parses in memory proportional to it.
func TestParseDiagJSONLargeInputBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"DCGM Diagnostic":{"test_categories":[{"category":"Hardware","tests":[`)
	for i := 0; b.Len() < MaxDiagOutput-4096; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`{"name":"memory ` + strconv.Itoa(i) + `","results":[{"entity_group":"GPU","entity_group_id":1,"entity_id":0,"status":"Pass","warnings":[{"warning":"` + strings.Repeat("w", 200) + `","error_id":1}]}],"test_summary":{"status":"Pass"}}`)
	}
	b.WriteString(`]}]}}`)
	doc := []byte(b.String())
	require.LessOrEqual(t, len(doc), MaxDiagOutput)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	rep, err := ParseDiagJSON(doc)
	runtime.ReadMemStats(&after)
	require.NoError(t, err)
	assert.Greater(t, len(rep.Tests), 5000)
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(32*len(doc)), "allocated for %d bytes", len(doc))
	res := rep.Evaluate(1, []GPU{{UUID: "GPU-a", Index: 0}}, []int{0}, DiagOptions{})
	assert.True(t, res[0].Passed, res[0].Detail)
	assert.LessOrEqual(t, len(res[0].Tests), maxTestsPerGPU)
}
