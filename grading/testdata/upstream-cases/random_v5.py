# Random logs built from pieces each v5-added parser cares about (fixed seed),
# for make_v5.py; 1,500 per parser of the same kind (seed 7) matched
# upstream v5.0.2 on all 15,000 during development.
import json, random
random.seed(7)
P = {
 "parse_log_carbon": ["PASS", "FAIL", " ", "\t", "src/a.js", "(1.2ms)", "(3 s)", "(4s)", "(\u0661ms)", "(x)", "PASSED", "\u00a0", ".", "ms", "s)"],
 "parse_log_grommet": ["FAIL", "PASS", " ", "\n", "a.js", "(1.2 s)", "(12ms)", "(1s)", "  ", "\u3000", "(1.2 ms)", ")", "("],
 "parse_log_openlayers": ["Chrome", "Headless", " ", "120.0", "(Linux", "x86_64)", "FAILED", "\n", "  ", "1)", "Error:", "case", ":", "mismatch", "name", "\t", "\u00a0"],
 "parse_log_bpmn_js": ["2KPhantomJS", "PhantomJS", "Chrome", "Headless", "HeadlessChrome", " ", "2.1.1", "(Linux", "0.0.0)", "x86_64)", "FAILED", "\n", "name", "\u00a0"],
 "parse_log_eslint": ["  ", " ", "1)", "12)", "\n", "name", "Error", "TypeError:", "AssertionError", "\t", "x", "\u2003"],
 "parse_log_highlightjs": ["  ", "    ", "\u2713", "\u2714", "1)", "name", "(12ms)", "(x)", "\n", " passing", "3", "\t", ")", "suite"],
 "parse_log_quarto_cli": ["[smoke]", "[unit]", " ", "...", "\x1b[32mok", "\x1b[31mFAILED", "/tmp/abc.qmd", "/tmp/x_y/", "/tmp/\u00e9/", "passed", "failed", "steps", "34mINFO", "test result:", "\n", "ERRORS", "failures:", "name"],
 "parse_log_next": [" xvfb-run ", "Starting browser Chrome", "\n", "  ", "    ", "\u2713", "\u2717", "TOTAL", "ERROR", "in", "LOG", "suite", "t", "\x1b[32m", "AssertionError: #x\n\n", "Running:", ")", "\n\n\n", "1)", "(1ms)"],
 "parse_log_lighthouse": ["running 2 test files", "\n", "  ", "    ", "\u2714", "1)", " ", "name", "(12ms)", "(3mms)", "3 passing", "suite", "PASS", "FAIL", "./node_modules/.bin/mocha --reporter json", "\"passes\": [", "\"failures\": [", "\"fullTitle\": \"t\",\n", "],", "]"],
 "parse_log_prismjs": ["./node_modules/.bin/mocha tests/run.js --reporter json\n", "{", "}", "\"failures\": ", "\"passes\": ", "[", "]", "{\"fullTitle\": \"a\"}", ", ", "\"x\"", "1", "\n"],
}
V = {"parse_log_next": ["1.0", "1.27"], "parse_log_lighthouse": ["10.0", "2.9", "3", "abc", "9.5"]}
for p, pieces in P.items():
    for i in range(40):
        log = "".join(random.choice(pieces) for _ in range(random.randint(1, 30)))
        print(json.dumps({"parser": p, "instance_id": "", "version": random.choice(V.get(p, [""])), "log": log, "why": "random"}))
