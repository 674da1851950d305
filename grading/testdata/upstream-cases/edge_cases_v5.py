# Hand-written edge inputs for the parsers upstream v5.0.2 changed
# (python3 edge_cases_v5.py > requests.jsonl); their expected results are
# what upstream v5's own functions return (oracle_v5.py).
import json
C = []
def add(parser, log, why, iid="", version=""):
    C.append({"parser": parser, "instance_id": iid, "version": version, "log": log, "why": why})

for p in ("parse_log_pytest", "parse_log_pytest_options", "parse_log_matplotlib", "parse_log_pytest_v2", "parse_log_xarray", "parse_log_requests", "parse_log_sphinx"):
    add(p, "SKIPPED [2] t.py:3: reason\nSKIPPED [1]\nSKIPPED [\u0661\u0662] x\nSKIPPED [a] y\nSKIPPED [] z\nPASSED [100%]\nXFAIL [3] w\nSKIPPED t.py::s\n", "skip summary [N] dropped, only for SKIPPED; Unicode digits")
for p in ("parse_log_pytest_v2", "parse_log_astropy", "parse_log_scikit"):
    add(p, "FAILED t.py::a[x y] - assert 1 - 2\nFAILED t.py::b[p - q]\nXFAIL t.py::c - reason here\nERROR t.py::d[1 2] - E\nt.py::e one  two PASSED\n\x1b[32mPASSED\x1b[0m t.py::f\u00a0g\nPASSED\nFAILED\tt.py::h\u3000i - m\n", "names with spaces; FAILED cut at the first ' - ' only; Unicode whitespace joins with one space")
add("parse_log_seaborn", "FAILED\nPASSED\nPASSED \nt::a PASSED x\n PASSED \nFAILED t::b\nPASSED t::c\nx PASSED\n", "lines of fewer than two fields skipped")
add("parse_log_maven", "+ mvn -Dtest=A#a\n+ mvn -Dtest=B#b\n[INFO] BUILD SUCCESS\n[INFO] BUILD FAILURE\nBUILD SUCCESS\n+ mvn -Dtest=C#c\n+ mvn -Dtest=D#d\nBUILD FAILURE\n", "FIFO names; a result with no waiting name pairs with later names")
add("parse_log_maven", "BUILD SUCCESS\nBUILD FAILURE\n+ mvn -Dtest=A#a -Dtest=B#b\n", "results before any name; last -Dtest= on the line")
add("parse_log_gradle_custom", "a.B > m\nwarning: x\n\nPASSED\nc.D > n FAILED\ne.F > o\ng.H > p\nFAILED\n> x PASSED\n  q.R  >  s  \n PASSED \nt.U > v\nPASSED x\n", "a name alone, a later bare status; a newer name replaces it; no reset by other lines")
add("parse_log_jest", "\u2713 name  (5 ms)\n  \u2715  spaced name \u00a0(1 s)\n\u25cb skipped \n\u2713 a (x)\n", "names stripped")

# The parsers v5 added for Multimodal JavaScript repositories.
add("parse_log_carbon", "PASS src/a.js (1.2ms)\nPASS src/b.js (3 s)\nPASS src/c.js (4s)\nPASS src/d.js\nFAIL src/e.js (1.2ms) (2ms)\nFAIL\tsrc/f.js (x)\n PASS g\nPASSED h\nFAIL src/\u0661.js (\u0661ms)\n", "first pattern wins; greedy name; Unicode digits")
add("parse_log_grommet", "FAIL src/a.test.js (1.2 s)\nPASS src/b.test.js (12ms)\nPASS  c (1s) \nFAIL\nsrc/d.js\nPASS e (1.2 ms) (3 ms)\nPASSx f\n", "\\s may be the newline; timing only at the end")
add("parse_log_openlayers", "Chrome Headless 120.0.6099.109 (Linux x86_64) ol/Map  render  FAILED\nChrome 120.0 (Linux x86_64) ol/View fit FAILED\n  1) ol.source\n     loads  tiles\n  Error: boom\ncase  rendering-x:  mismatch\ncase y: mismatch\n", "four patterns in order, whitespace collapsed")
add("parse_log_bpmn_js", "\x1b[2KPhantomJS 2.1.1 (Linux 0.0.0) Modeler should import FAILED\n2KPhantomJS 2.1.1 (Linux x86_64) Viewer x FAILED\nChrome Headless 120 (Linux x86_64) features y FAILED\nHeadlessChrome 120.0 (Linux 0.0.0) z  FAILED\nPhantomJS 2 (Linux 0) no FAILED\n", "third pattern keys by its second group")
add("parse_log_eslint", "  1) RuleTester\n       valid\n         foo bar:\n     AssertionError [ERR_ASSERTION]: x\n  2) second  one\n     TypeError: y\n 3) one space\n   Error: z\n", "lazy name up to whitespace then (.*)Error")
add("parse_log_highlightjs", "  markup\n    \u2713 html (12ms)\n    \u2714 xml\n  1) css\n    2) broken (3ms) tail\n  other\n \u2713 top\n\n  3 passing (20ms)\n  1 failing\n  1) after summary\n", "suite from two-space lines; summary and after cut")
add("parse_log_quarto_cli", "[smoke] /tmp/abc.qmd ... \x1b[32mok\n[unit] /tmp/abc.qmd again ... \x1b[31mFAILED\n[smoke] /tmp/xyz/ render ... \x1b[32mok\n[smoke] no status ...\n[unit] a passed failed steps ...\n[smoke] \x1b[34mINFO x\ntest result: [unit] ...\n[smoke] /tmp/abc.qmd /tmp/def.qmd ... 32mok\nERRORS\n[smoke] after ... 32mok\n", "tmp paths numbered; rejects; stop at ERRORS")
add("parse_log_lighthouse", "running 3 test files\n  suite\n    inner\n      \u2714 passes (12ms)\n      1) fails (3mms)\n    \u2714 plain\n  2) top fail\n3 passing\n  \u2714 after\n", "mocha for 10.0", version="10.0")
add("parse_log_lighthouse", "PASS a.js (1s)\nFAIL b.js\n", "float(version) >= 3: carbon", version="11.1")
add("parse_log_lighthouse", "./node_modules/.bin/mocha --reporter json\n{\"passes\": [\n{\"fullTitle\": \"a b\",\n\"x\": 1}\n],\n\"failures\": [\n{\"fullTitle\": \"c\",\n}\n],\n}\n", "json reporter before 3", version="2.9")
add("parse_log_lighthouse", "x\n", "float('') raises", version="")
add("parse_log_next", "junk xvfb-run x\nStarting browser Chrome\n  Suite A\n    \u2713 t1\n    nested\n      \u2717 t2 msg\n    in it\n  ERROR x\n  Suite B\n    \u2713   t3\nTOTAL: 3\n    \u2713 never\n", "v1: suites by indent, stop at TOTAL", version="1.0")
add("parse_log_next", "Running:  a.spec.js    (1 of 2)\n\n\n  Suite One\n    \u2713 passes (12ms)\n    1) fails\nRunning:  b.spec.js)\n\n\n  Suite Two\n    \u2713 ok one (1ms) (2ms)\n", "v2 for 1.27: per Running: section", version="1.27")
add("parse_log_prismjs", "x ./node_modules/.bin/mocha tests/run.js --reporter json\n{\"stats\": {}, \"failures\": [{\"fullTitle\": \"f1\"}], \"passes\": [{\"fullTitle\": \"p1\"}, {\"fullTitle\": \"f1\"}]}\ntrailing }\n", "json blocks, passes after failures")
add("parse_log_prismjs", "./node_modules/.bin/mocha tests/run.js --reporter json\n{bad json}\n", "json.loads raises")
add("parse_log_prismjs", "./node_modules/.bin/mocha tests/run.js --reporter json\n{\"failures\": [], \"passes\": {}}\n", "empty containers iterate nothing")
add("parse_log_prismjs", "./node_modules/.bin/mocha tests/run.js --reporter json\n{\"failures\": []}\n", "KeyError passes")
print("\n".join(json.dumps(c) for c in C))
