package frdumptest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/pickle"
)

// The generator's dumps against the real ones of the same kind of job (the
// receiver's testdata/real: a 16-rank Megatron-LM MoE job, PyTorch 2.9).

var realIncidents = []string{"gpu_error_1st", "lock_gil_1st"}

func realDump(t *testing.T, incident string, rank int) *pickle.Dict {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "testdata", "real", "nvrx-megatron-moe", incident, MoEFileName(rank)))
	require.NoError(t, err)
	return decode(t, raw)
}

func decode(t *testing.T, raw []byte) *pickle.Dict {
	t.Helper()
	v, err := pickle.DecodeWithOptions(raw, pickle.Options{})
	require.NoError(t, err)
	d, ok := v.(*pickle.Dict)
	require.True(t, ok)
	return d
}

// shape adds the paths of v to out, each with its type: the keys of
// pg_config and pg_status (group names and ids) and list indexes are "*".
func shape(path string, v any, out map[string]bool) {
	switch x := v.(type) {
	case *pickle.Dict:
		out[path+":dict"] = true
		for _, it := range x.Items {
			k := fmt.Sprint(it.Key)
			if path == ".pg_config" || path == ".pg_status" {
				k = "*"
			}
			shape(path+"."+k, it.Value, out)
		}
	case []any:
		out[path+":list"] = true
		for _, e := range x {
			shape(path+"[*]", e, out)
		}
	case pickle.Tuple:
		out[path+":tuple"+strconv.Itoa(len(x))] = true
		for i, e := range x {
			shape(path+"("+strconv.Itoa(i)+")", e, out)
		}
	default:
		out[fmt.Sprintf("%s:%T", path, v)] = true
	}
}

func sortedPaths(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// optional are what one side may lack: the real dumps have no Python
// frames (torch was not asked for stacks) and no times the watchdog never
// saw; the generator's hung ranks never record one either.
func optional(path string) bool {
	for _, p := range []string{".entries[*].frames", ".entries[*].time_discovered_started_ns:int64", ".entries[*].time_discovered_completed_ns:int64"} {
		if len(path) >= len(p) && path[:len(p)] == p {
			return true
		}
	}
	return false
}

// Every key at every level has the same type in the generator's real-format
// dumps as in the real ones.
func TestMoEShapeIsTheRealDumps(t *testing.T) {
	real := map[string]bool{}
	for _, inc := range realIncidents {
		for r := range MoEWorld {
			shape("", realDump(t, inc, r), real)
		}
	}
	gen := map[string]bool{}
	for _, sc := range []string{MoEGPUError, MoEGILHang, MoEHealthy} {
		for _, d := range MegatronMoE(MoEConfig{Scenario: sc, OnlyActive: true}) {
			shape("", decode(t, Pickle(d)), gen)
		}
	}
	var onlyReal, onlyGen []string
	for _, p := range sortedPaths(real) {
		if !gen[p] && !optional(p) {
			onlyReal = append(onlyReal, p)
		}
	}
	for _, p := range sortedPaths(gen) {
		if !real[p] && !optional(p) {
			onlyGen = append(onlyGen, p)
		}
	}
	assert.Empty(t, onlyReal, "in the real dumps only")
	assert.Empty(t, onlyGen, "in the generated dumps only")
}

// The relationships of the real format: pg_status keys are the entries'
// pg_id, not pg_config's names; one id names different groups on different
// ranks; a GIL-stuck rank writes no entries; ranks dump at different
// moments.
func TestMoERealFormatRelationships(t *testing.T) {
	check := func(name string, dumps func(r int) *pickle.Dict) (idNames map[string]map[string]bool, empty []int) {
		idNames = map[string]map[string]bool{}
		for r := range MoEWorld {
			d := dumps(r)
			status, _ := d.Get("pg_status")
			config, _ := d.Get("pg_config")
			keys := map[string]bool{}
			notNames := 0
			for _, it := range status.(*pickle.Dict).Items {
				keys[it.Key.(string)] = true
				if _, ok := config.(*pickle.Dict).Get(it.Key); !ok {
					notNames++
				}
			}
			assert.Positive(t, notNames, "%s rank %d: pg_status keys that are no group's name", name, r)
			entries, _ := d.Get("entries")
			if len(entries.([]any)) == 0 {
				empty = append(empty, r)
			}
			for _, e := range entries.([]any) {
				ed := e.(*pickle.Dict)
				id, _ := ed.Get("pg_id")
				pg, _ := ed.Get("process_group")
				key := strconv.FormatInt(id.(int64), 10)
				assert.True(t, keys[key], "%s rank %d: an entry's pg_id %s is a pg_status key", name, r, key)
				if idNames[key] == nil {
					idNames[key] = map[string]bool{}
				}
				idNames[key][pg.(pickle.Tuple)[0].(string)] = true
			}
		}
		return idNames, empty
	}
	realIDs, realEmpty := check("real", func(r int) *pickle.Dict { return realDump(t, "lock_gil_1st", r) })
	assert.Equal(t, []int{9, 14}, realEmpty)
	genDumps := MegatronMoE(MoEConfig{Scenario: MoEGILHang, OnlyActive: true, Culprits: []int{2, 3}})
	genIDs, genEmpty := check("generated", func(r int) *pickle.Dict { return decode(t, Pickle(genDumps[r])) })
	assert.Equal(t, []int{2, 3}, genEmpty, "the GIL-stuck culprits dump no entries")
	for name, ids := range map[string]map[string]map[string]bool{"real": realIDs, "generated": genIDs} {
		several := false
		for _, names := range ids {
			several = several || len(names) > 1
		}
		assert.True(t, several, "%s: one pg_id names different groups on different ranks", name)
	}
	var moments []int64
	for _, d := range genDumps {
		if !slices.Contains(moments, d.DumpedAtNs) {
			moments = append(moments, d.DumpedAtNs)
		}
	}
	assert.Greater(t, len(moments), 1, "ranks dump at different moments")
}
