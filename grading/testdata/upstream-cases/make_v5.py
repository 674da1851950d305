"""Rebuilds v5.jsonl: python3 make_v5.py V5_DIR > v5.jsonl (see README.md)."""
import json
import subprocess
import sys

reqs = []
for f in ("edge.jsonl", "sampled.jsonl"):
    for line in open(f):
        d = json.loads(line)
        reqs.append({"parser": d["parser"], "instance_id": d["instance_id"], "version": "", "log": d["log"], "why": d.get("why", ""), "from": f})
for script in ("edge_cases_v5.py", "random_v5.py"):
    for line in subprocess.run(["python3", script], capture_output=True, text=True, check=True).stdout.splitlines():
        d = json.loads(line)
        d["from"] = script
        reqs.append(d)
inp = "".join(json.dumps({k: r[k] for k in ("parser", "instance_id", "version", "log")}) + "\n" for r in reqs)
out = subprocess.run(["python3", "oracle_v5.py", sys.argv[1]], input=inp, capture_output=True, text=True, check=True).stdout.splitlines()
assert len(out) == len(reqs)
for r, o in zip(reqs, out):
    o = json.loads(o)
    rec = {k: r[k] for k in ("parser", "instance_id", "version", "why", "from", "log")}
    if o["ok"]:
        rec["status_map"] = o["map"]
    else:
        rec["raises"] = o["err"]
    print(json.dumps(rec))
