"""Rebuilds grade_v5.jsonl: python3 make_grade_v5.py V5_DIR N SEED > grade_v5.jsonl
(random_grade_v5.py's requests with grade_oracle_v5.py's responses)."""
import json
import subprocess
import sys

reqs = subprocess.run(["python3", "random_grade_v5.py", sys.argv[2], sys.argv[3]], capture_output=True, text=True, check=True).stdout
out = subprocess.run(["python3", "grade_oracle_v5.py", sys.argv[1]], input=reqs, capture_output=True, text=True, check=True).stdout.splitlines()
reqs = reqs.splitlines()
assert len(out) == len(reqs)
for r, o in zip(reqs, out):
    rec = json.loads(r)
    rec.update(json.loads(o))
    print(json.dumps(rec))
