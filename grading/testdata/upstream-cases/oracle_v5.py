"""Runs upstream SWE-bench v5.0.2's own log parser functions on requests.

usage: python3 oracle_v5.py V5_DIR < requests.jsonl > responses.jsonl

V5_DIR is an unmodified extract of upstream at 7a21e05 (5.0.2 plus one
test-only commit): git archive 7a21e05 swebench | tar -x. Each request line
is {"parser": NAME, "instance_id": ID, "log": TEXT} where NAME is a key of
v5's PARSER_REGISTRY; each response line is {"ok": true, "map": [[test,
status], ...]} (dict order) or {"ok": false, "err": "ExceptionType: ..."}.

Only swebench/harness/log_parsers/*.py is imported from V5_DIR, unmodified.
What they import from the rest of the package is replaced by stand-ins made
here: harness.constants.TestStatus (the enum's values), types.TestSpec (only
instance_id and version are read), and utils.ansi_escape (its source copied
from V5_DIR's swebench/utils.py, which imports packages Debian lacks).
"""
import contextlib
import io
import json
import os
import re
import shutil
import sys
import tempfile

src = os.path.join(sys.argv[1], "swebench")
root = tempfile.mkdtemp()
pkg = os.path.join(root, "swebench")
os.makedirs(os.path.join(pkg, "harness", "constants"))
for d in ("swebench", "swebench/harness"):
    open(os.path.join(root, d, "__init__.py"), "w").close()
with open(os.path.join(pkg, "harness", "constants", "__init__.py"), "w") as f:
    f.write("from enum import Enum\nclass TestStatus(Enum):\n"
            "    FAILED = 'FAILED'\n    PASSED = 'PASSED'\n    SKIPPED = 'SKIPPED'\n"
            "    ERROR = 'ERROR'\n    XFAIL = 'XFAIL'\n")
with open(os.path.join(pkg, "types.py"), "w") as f:
    f.write("class TestSpec:\n    def __init__(self, instance_id, version=''):\n"
            "        self.instance_id = instance_id\n        self.version = version\n")
utils = open(os.path.join(src, "utils.py")).read()
m = re.search(r"^def ansi_escape\(.*?(?=^\S|\Z)", utils, re.S | re.M)
with open(os.path.join(pkg, "utils.py"), "w") as f:
    f.write("import re\n" + m.group(0))
shutil.copytree(os.path.join(src, "harness", "log_parsers"), os.path.join(pkg, "harness", "log_parsers"))
sys.path.insert(0, root)

from swebench.harness.log_parsers import PARSER_REGISTRY  # noqa: E402
from swebench.types import TestSpec  # noqa: E402

for line in sys.stdin:
    req = json.loads(line)
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # parsers print warnings
            sm = PARSER_REGISTRY[req["parser"]](req["log"], TestSpec(req.get("instance_id", ""), req.get("version", "")))
        out = {"ok": True, "map": [[k, v] for k, v in sm.items()]}
    except Exception as e:  # upstream raising is a result too
        out = {"ok": False, "err": type(e).__name__ + ": " + str(e)[:200]}
    print(json.dumps(out), flush=True)
