package grading

import (
	"fmt"
	"iter"
	"strings"
)

// parseFunc fills sm from log (already newline-normalized). Upstream's
// parsers that raise on a log return an error wrapping
// ErrUpstreamParserRaises.
type parseFunc func(log string, sm *StatusMap) error

// parserDef is one upstream v4.1.0 log parser function.
type parserDef struct {
	// name is the function's __name__, e.g. "parse_log_gotest".
	name string
	// module is the log_parsers module defining it ("python", "c", "go",
	// "java", "javascript", "php", "ruby", "rust").
	module string
	// repos are the repositories MAP_REPO_TO_PARSER gives this parser,
	// separated by spaces. (A string rather than a slice keeps the table
	// free of allocations: each lookup builds it afresh.)
	repos string
	// failOnly: every repo of this parser is in FAIL_ONLY_REPOS (a test
	// absent from the status map counts as passed, see EvalTestsReport).
	failOnly bool
	// parse is the parser; nil for a dispatcher.
	parse parseFunc
	// dispatch, for parsers that pick another parser by instance id
	// (parse_log_jekyll, parse_log_immutable_js), returns the name of the
	// parser to call, or an error where upstream raises.
	dispatch func(instanceID string) (string, error)
}

// parserTable is upstream v4.1.0's log parsers and MAP_REPO_TO_PARSER: the
// one list the parser names, the repository map, FAIL_ONLY_REPOS and the
// --parser help text are derived from. Adding a parser is adding an entry.
// The entries hold only strings, booleans and functions and the array does
// not escape, so walking the table allocates nothing: ParserName of the
// last repository takes 2 us and no allocation (12 us and 32 allocations
// when the table was a slice of entries holding slices).
func parserTable() iter.Seq[parserDef] {
	return func(yield func(parserDef) bool) {
		for _, p := range [...]parserDef{
			// swebench/harness/log_parsers/python.py
			{name: "parse_log_pytest", module: "python", parse: parsePytest,
				repos: "marshmallow-code/marshmallow pallets/flask pvlib/pvlib-python pydata/xarray " +
					"pylint-dev/astroid pytest-dev/pytest pyvista/pyvista sqlfluff/sqlfluff"},
			{name: "parse_log_pytest_options", module: "python", parse: parsePytestOptions,
				repos: "psf/requests pydicom/pydicom pylint-dev/pylint"},
			{name: "parse_log_pytest_v2", module: "python", parse: parsePytestV2,
				repos: "astropy/astropy scikit-learn/scikit-learn sphinx-doc/sphinx"},
			{name: "parse_log_django", module: "python", parse: parseDjango, repos: "django/django"},
			{name: "parse_log_matplotlib", module: "python", parse: parseMatplotlib, repos: "matplotlib/matplotlib"},
			{name: "parse_log_seaborn", module: "python", parse: parseSeaborn, repos: "mwaskom/seaborn"},
			{name: "parse_log_sympy", module: "python", parse: parseSympy, repos: "sympy/sympy"},

			// c.py
			{name: "parse_log_redis", module: "c", parse: parseRedis, repos: "redis/redis valkey-io/valkey"},
			{name: "parse_log_jq", module: "c", parse: parseJq, repos: "jqlang/jq"},
			{name: "parse_log_doctest", module: "c", parse: parseDoctest, repos: "nlohmann/json"},
			{name: "parse_log_micropython_test", module: "c", parse: parseMicropython, repos: "micropython/micropython"},
			{name: "parse_log_googletest", module: "c", parse: parseGoogletest, repos: "fmtlib/fmt"},

			// go.py
			{name: "parse_log_gotest", module: "go", parse: parseGotest,
				repos: "caddyserver/caddy hashicorp/terraform prometheus/prometheus gohugoio/hugo gin-gonic/gin"},

			// java.py
			{name: "parse_log_maven", module: "java", parse: parseMaven, repos: "google/gson apache/druid javaparser/javaparser"},
			{name: "parse_log_ant", module: "java", parse: parseAnt, repos: "projectlombok/lombok"},
			{name: "parse_log_gradle_custom", module: "java", parse: parseGradleCustom, repos: "apache/lucene reactivex/rxjava"},

			// javascript.py
			{name: "parse_log_calypso", module: "javascript", parse: parseCalypso, repos: "Automattic/wp-calypso"},
			{name: "parse_log_chart_js", module: "javascript", parse: parseChartJS, repos: "chartjs/Chart.js", failOnly: true},
			{name: "parse_log_marked", module: "javascript", parse: parseMarked, repos: "markedjs/marked", failOnly: true},
			{name: "parse_log_p5js", module: "javascript", parse: parseP5js, repos: "processing/p5.js", failOnly: true},
			{name: "parse_log_react_pdf", module: "javascript", parse: parseReactPDF, repos: "diegomura/react-pdf"},
			{name: "parse_log_jest", module: "javascript", parse: parseJest, repos: "babel/babel facebook/docusaurus"},
			{name: "parse_log_jest_json", module: "javascript", parse: parseJestJSON},
			{name: "parse_log_vitest", module: "javascript", parse: parseVitest, repos: "vuejs/core"},
			{name: "parse_log_karma", module: "javascript", parse: parseKarma, repos: "preactjs/preact"},
			{name: "parse_log_tap", module: "javascript", parse: parseTap, repos: "mrdoob/three.js axios/axios"},
			{name: "parse_log_immutable_js", module: "javascript", dispatch: dispatchImmutableJS,
				repos: "immutable-js/immutable-js"},

			// php.py
			{name: "parse_log_phpunit", module: "php", parse: parsePHPUnit,
				repos: "phpoffice/phpspreadsheet laravel/framework php-cs-fixer/php-cs-fixer briannesbitt/carbon"},

			// ruby.py
			{name: "parse_log_minitest", module: "ruby", parse: parseMinitest},
			{name: "parse_log_cucumber", module: "ruby", parse: parseCucumber},
			{name: "parse_log_ruby_unit", module: "ruby", parse: parseRubyUnit, repos: "fluent/fluentd faker-ruby/faker"},
			{name: "parse_log_rspec_transformed_json", module: "ruby", parse: parseRspecTransformedJSON,
				repos: "fastlane/fastlane jordansissel/fpm rubocop/rubocop"},
			{name: "parse_log_jekyll", module: "ruby", dispatch: dispatchJekyll, repos: "jekyll/jekyll"},

			// rust.py
			{name: "parse_log_cargo", module: "rust", parse: parseCargo,
				repos: "burntsushi/ripgrep sharkdp/bat astral-sh/ruff tokio-rs/tokio uutils/coreutils " +
					"nushell/nushell tokio-rs/axum"},
		} {
			if !yield(p) {
				return
			}
		}
	}
}

// repoList returns the repositories of p.
func (p parserDef) repoList() []string {
	return strings.Fields(p.repos)
}

// hasRepo reports whether MAP_REPO_TO_PARSER gives repo to p.
func (p parserDef) hasRepo(repo string) bool {
	if repo == "" || !strings.Contains(p.repos, repo) {
		return false
	}
	for r := range strings.SplitSeq(p.repos, " ") {
		if r == repo {
			return true
		}
	}
	return false
}

// parserForRepo returns the entry MAP_REPO_TO_PARSER gives repo.
func parserForRepo(repo string) (parserDef, bool) {
	for p := range parserTable() {
		if p.hasRepo(repo) {
			return p, true
		}
	}
	return parserDef{}, false
}

// parserNamed returns the parser whose upstream function name is name.
func parserNamed(name string) (parserDef, bool) {
	for p := range parserTable() {
		if p.name == name {
			return p, true
		}
	}
	return parserDef{}, false
}

// resolve returns the parser that actually parses a log of instanceID:
// p itself, or the one a dispatcher picks. The error is upstream's
// exception for an instance id the dispatcher does not know.
func (p parserDef) resolve(instanceID string) (string, parseFunc, error) {
	if p.dispatch == nil {
		return p.name, p.parse, nil
	}
	sub, err := p.dispatch(instanceID)
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", p.name, err)
	}
	q, ok := parserNamed(sub)
	if !ok || q.parse == nil {
		return "", nil, fmt.Errorf("%s dispatches to %s, which is not a parser", p.name, sub)
	}
	return q.name, q.parse, nil
}

// ParserName returns the name of the upstream v4.1.0 function that parses
// logs of repo (the __name__ of MAP_REPO_TO_PARSER[repo], e.g.
// "parse_log_pytest_v2" for astropy/astropy, "parse_log_jekyll" for
// jekyll/jekyll), and whether upstream's map has the repository.
func ParserName(repo string) (string, bool) {
	p, ok := parserForRepo(repo)
	return p.name, ok
}

// ParserNames lists every upstream parser function name GradeOptions.Parser
// accepts, in upstream's module order.
func ParserNames() []string {
	var names []string
	for p := range parserTable() {
		names = append(names, p.name)
	}
	return names
}

// ParserHelp is a one-line description of the accepted parser names, for a
// command's help text.
func ParserHelp() string {
	return "one of upstream v4.1.0's log parser functions: " + strings.Join(ParserNames(), ", ")
}

// FailOnlyRepo reports whether repo is in upstream's FAIL_ONLY_REPOS: a
// labelled test counts as failed only when the status map says FAILED.
func FailOnlyRepo(repo string) bool {
	p, ok := parserForRepo(repo)
	return ok && p.failOnly
}

// dispatchJekyll is parse_log_jekyll's choice: instance_id.split("-")[1]
// names the pull request; 9141, 8047 and 8167 use minitest, 8761 and 8771
// cucumber, any other raises ValueError (IndexError without a "-").
func dispatchJekyll(instanceID string) (string, error) {
	parts := strings.Split(instanceID, "-")
	if len(parts) < 2 {
		return "", fmt.Errorf("instance id %q: split(\"-\")[1] raises IndexError: %w", instanceID, ErrUpstreamParserRaises)
	}
	switch parts[1] {
	case "9141", "8047", "8167":
		return "parse_log_minitest", nil
	case "8761", "8771":
		return "parse_log_cucumber", nil
	}
	return "", fmt.Errorf("unknown instance id %q (ValueError): %w", instanceID, ErrUpstreamParserRaises)
}

// dispatchImmutableJS is parse_log_immutable_js's choice:
// instance_id.split("-")[-1] is 2006 (jest --verbose) or 2005 (jest --json
// through JEST_JSON_JQ_TRANSFORM); any other raises ValueError.
func dispatchImmutableJS(instanceID string) (string, error) {
	switch instanceID[strings.LastIndexByte(instanceID, '-')+1:] {
	case "2006":
		return "parse_log_jest", nil
	case "2005":
		return "parse_log_jest_json", nil
	}
	return "", fmt.Errorf("unknown instance id %q (ValueError): %w", instanceID, ErrUpstreamParserRaises)
}
