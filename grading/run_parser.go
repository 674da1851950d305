package grading

// parserFor is the parser of repo, or the one opts.Parser names.
func (o GradeOptions) parserFor(repo string) (string, parseFunc) {
	if o.Parser == "" {
		return parserFor(repo)
	}
	return parserNamed(o.Parser)
}

// parserNamed returns the upstream parser function called name, or nil.
func parserNamed(name string) (string, parseFunc) {
	switch name {
	case "parse_log_pytest":
		return name, parsePytest
	case "parse_log_pytest_options":
		return name, parsePytestOptions
	case "parse_log_pytest_v2":
		return name, parsePytestV2
	case "parse_log_django":
		return name, parseDjango
	case "parse_log_matplotlib":
		return name, parseMatplotlib
	case "parse_log_seaborn":
		return name, parseSeaborn
	case "parse_log_sympy":
		return name, parseSympy
	}
	return "", nil
}

// ParserNames lists the parser names GradeOptions.Parser accepts.
func ParserNames() []string {
	return []string{"parse_log_pytest", "parse_log_pytest_options", "parse_log_pytest_v2",
		"parse_log_django", "parse_log_matplotlib", "parse_log_seaborn", "parse_log_sympy"}
}
