# Test-data tool of otelcol-gpu (not run by the tests): converts one dump
# written by gen_fr_dumps.py from pickle to the JSON form that script writes
# with --json. usage: pickle_to_json.py IN OUT
import json, pickle, sys, pickletools
src, dst = sys.argv[1], sys.argv[2]
data = open(src, 'rb').read()
bad = {op.name for op, _, _ in pickletools.genops(data)} & {'GLOBAL','STACK_GLOBAL','REDUCE','BUILD','INST','OBJ','NEWOBJ','NEWOBJ_EX'}
assert not bad, bad
d = pickle.loads(data)
j = json.loads(json.dumps(d, default=list))
for e in j["entries"]:
    e.pop("frames", None)
    e["process_group"] = list(e["process_group"])
    for k in ("time_discovered_started_ns", "time_discovered_completed_ns"):
        if e.get(k) is None:
            e[k] = 0
j["pg_status"] = {k: {kk: str(vv) for kk, vv in v.items()} for k, v in j["pg_status"].items()}
with open(dst, "w") as f:
    json.dump(j, f, indent=1)
