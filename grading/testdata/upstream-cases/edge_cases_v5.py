# Hand-written edge inputs for the parsers upstream v5.0.2 changed
# (python3 edge_cases_v5.py > requests.jsonl); their expected results are
# what upstream v5's own functions return (oracle_v5.py).
import json
C = []
def add(parser, log, why, iid=""):
    C.append({"parser": parser, "instance_id": iid, "log": log, "why": why})

for p in ("parse_log_pytest", "parse_log_pytest_options", "parse_log_matplotlib", "parse_log_pytest_v2", "parse_log_xarray", "parse_log_requests", "parse_log_sphinx"):
    add(p, "SKIPPED [2] t.py:3: reason\nSKIPPED [1]\nSKIPPED [\u0661\u0662] x\nSKIPPED [a] y\nSKIPPED [] z\nPASSED [100%]\nXFAIL [3] w\nSKIPPED t.py::s\n", "skip summary [N] dropped, only for SKIPPED; Unicode digits")
for p in ("parse_log_pytest_v2", "parse_log_astropy", "parse_log_scikit"):
    add(p, "FAILED t.py::a[x y] - assert 1 - 2\nFAILED t.py::b[p - q]\nXFAIL t.py::c - reason here\nERROR t.py::d[1 2] - E\nt.py::e one  two PASSED\n\x1b[32mPASSED\x1b[0m t.py::f\u00a0g\nPASSED\nFAILED\tt.py::h\u3000i - m\n", "names with spaces; FAILED cut at the first ' - ' only; Unicode whitespace joins with one space")
add("parse_log_seaborn", "FAILED\nPASSED\nPASSED \nt::a PASSED x\n PASSED \nFAILED t::b\nPASSED t::c\nx PASSED\n", "lines of fewer than two fields skipped")
add("parse_log_maven", "+ mvn -Dtest=A#a\n+ mvn -Dtest=B#b\n[INFO] BUILD SUCCESS\n[INFO] BUILD FAILURE\nBUILD SUCCESS\n+ mvn -Dtest=C#c\n+ mvn -Dtest=D#d\nBUILD FAILURE\n", "FIFO names; a result with no waiting name pairs with later names")
add("parse_log_maven", "BUILD SUCCESS\nBUILD FAILURE\n+ mvn -Dtest=A#a -Dtest=B#b\n", "results before any name; last -Dtest= on the line")
add("parse_log_gradle_custom", "a.B > m\nwarning: x\n\nPASSED\nc.D > n FAILED\ne.F > o\ng.H > p\nFAILED\n> x PASSED\n  q.R  >  s  \n PASSED \nt.U > v\nPASSED x\n", "a name alone, a later bare status; a newer name replaces it; no reset by other lines")
add("parse_log_jest", "\u2713 name  (5 ms)\n  \u2715  spaced name \u00a0(1 s)\n\u25cb skipped \n\u2713 a (x)\n", "names stripped")
print("\n".join(json.dumps(c) for c in C))
