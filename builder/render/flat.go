package render

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/swebuild/swebuild/internal/pystr"
)

// FileFlatDockerfile is the flat layout's one Dockerfile per instance and
// arch (written beside eval.sh and meta.json).
const FileFlatDockerfile = "Dockerfile"

// Flat is the v5 flat Dockerfile of a result: what upstream's
// tools/make_v5_dockerfiles.py (2514c86) build_flat writes, one
// self-contained file with setup_env.sh and setup_repo.sh inlined as
// heredocs and the image-assets downloads. imageAssets is the record's
// image_assets (core.Instance.ImageAssets).
//
// One deliberate difference: when Dockerfile.env is the base template again
// (every language but Python and the JavaScript env template: C, Go, Java,
// PHP, Ruby, Rust, js_2), upstream's tool keeps the whole base body a
// second time, whose second `adduser nonroot` fails the build; Flat leaves
// that repeated body out. Every other byte is upstream's.
func (r *Result) Flat(imageAssets string) (string, error) {
	return r.flat(imageAssets, false)
}

// flat builds the flat file; keepRepeatedBase writes upstream's bytes even
// where the base body is repeated (for the golden test).
func (r *Result) flat(imageAssets string, keepRepeatedBase bool) (string, error) {
	assets, err := imageAssetsBlock(imageAssets)
	if err != nil {
		return "", fmt.Errorf("image_assets: %w", err)
	}
	base := pystr.Strip(r.BaseDockerfile)
	base = strings.ReplaceAll(base, "--platform=linux/x86_64", "--platform=linux/amd64")
	base = strings.ReplaceAll(base, "ubuntu:22.04", "ubuntu:jammy")
	parts := []string{base, ""}
	env, envFlags := dropScriptLines(dropFrom(r.EnvDockerfile), FileSetupEnv)
	if !r.EnvFromBase || keepRepeatedBase {
		parts = append(parts, pystr.Strip(env), "")
	}
	inst, instFlags := dropScriptLines(dropFrom(r.InstanceDockerfile), FileSetupRepo)
	parts = append(parts,
		asHeredocRun(envFlags, r.SetupEnv), "",
		pystr.Strip(inst), "",
		asHeredocRun(instFlags, r.SetupRepo), "",
		assets, "",
		"WORKDIR /testbed", "")
	return strings.Join(parts, "\n"), nil
}

// heredocDelimiter is "EOF_" + sha256(parts...)[:12].
func heredocDelimiter(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
	}
	return "EOF_" + hex.EncodeToString(h.Sum(nil))[:12]
}

// asHeredoc is upstream's as_heredoc: RUN <<D, the script without trailing
// whitespace, D; D from the unstripped script, rehashed with itself while
// the script contains it.
func asHeredoc(script string) string { return asHeredocRun("", script) }

// asHeredocRun is asHeredoc with RUN flags (e.g. "--mount=... ") before
// the heredoc.
func asHeredocRun(flags, script string) string {
	d := heredocDelimiter(script)
	for strings.Contains(script, d) {
		d = heredocDelimiter(script, d)
	}
	return "RUN " + flags + "<<" + d + "\n" + pystr.RStrip(script) + "\n" + d + "\n"
}

// dropFrom removes the lines whose left-stripped text starts with "FROM ".
func dropFrom(dockerfile string) string {
	lines := strings.Split(dockerfile, "\n")
	out := lines[:0:0]
	for _, l := range lines {
		if !strings.HasPrefix(pystr.LStrip(l), "FROM ") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// dropScriptLines removes the lines that name script and match
// `\s*(COPY|RUN)\b` (the COPY, sed, chmod and RUN of an inlined script).
// flags are the leading --flags of the last dropped RUN, each followed by a
// space (e.g. the fixture profile's --mount of the git mirror), which the
// heredoc that replaces it needs too; upstream's templates have none.
func dropScriptLines(dockerfile, script string) (_ string, flags string) {
	lines := strings.Split(dockerfile, "\n")
	out := lines[:0:0]
	for _, l := range lines {
		if strings.Contains(l, script) && copyOrRun(l) {
			if rest, ok := strings.CutPrefix(pystr.LStrip(l), "RUN"); ok {
				flags = ""
				for _, f := range strings.Fields(rest) {
					if !strings.HasPrefix(f, "--") {
						break
					}
					flags += f + " "
				}
			}
			continue
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n"), flags
}

// copyOrRun is re.match(r"\s*(COPY|RUN)\b", line).
func copyOrRun(line string) bool {
	s := pystr.LStrip(line)
	for _, kw := range []string{"COPY", "RUN"} {
		if rest, ok := strings.CutPrefix(s, kw); ok {
			r, _ := utf8.DecodeRuneInString(rest)
			if rest == "" || !(r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r)) {
				return true
			}
		}
	}
	return false
}

// imageAssetsBlock is upstream's image_assets_block: a heredoc that
// downloads every problem_statement, patch and test_patch asset into
// /swebench/image_assets/<key>/<rel> (failures ignored), or "" when there
// is none or the JSON is invalid. A URL or path holding a single quote or a
// line break is an error: upstream would write a broken script.
func imageAssetsBlock(raw string) (string, error) {
	if raw == "" {
		return "", nil
	}
	if !json.Valid([]byte(raw)) {
		return "", nil // json.loads fails: upstream writes no block
	}
	var assets map[string]json.RawMessage
	if err := json.Unmarshal([]byte(raw), &assets); err != nil || assets == nil {
		return "", fmt.Errorf("want a JSON object, got %.40q", raw)
	}
	lines := []string{"#!/bin/bash", "set -euxo pipefail", "mkdir -p /swebench/image_assets"}
	found := false
	for _, key := range []string{"problem_statement", "patch", "test_patch"} {
		v := assets[key]
		if len(v) == 0 || string(v) == "null" {
			continue
		}
		var items []json.RawMessage
		if err := json.Unmarshal(v, &items); err != nil {
			return "", fmt.Errorf("%s: want a list: %w", key, err)
		}
		for i, item := range items {
			url, rel, err := assetItem(item)
			if err != nil {
				return "", fmt.Errorf("%s[%d]: %w", key, i, err)
			}
			if url == "" || rel == "" {
				continue
			}
			if strings.ContainsAny(url+rel, "'\n\r") {
				return "", fmt.Errorf("%s[%d]: a quote or line break in %q / %q", key, i, url, rel)
			}
			found = true
			dest := "/swebench/image_assets/" + key + "/" + rel
			lines = append(lines,
				"mkdir -p $(dirname '"+dest+"')",
				"curl -fsSL -o '"+dest+"' '"+url+"' || true")
		}
	}
	if !found {
		return "", nil
	}
	return asHeredoc(strings.Join(lines, "\n")), nil
}

// assetItem reads one asset: a URL string (rel: its last path segment) or
// an object with url and path (rel: path, else the URL's last segment).
func assetItem(item json.RawMessage) (url, rel string, err error) {
	lastSegment := func(u string) string {
		u = strings.TrimRight(u, "/")
		return u[strings.LastIndexByte(u, '/')+1:]
	}
	if string(item) == "null" {
		return "", "", nil
	}
	if len(item) > 0 && item[0] == '"' {
		if err := json.Unmarshal(item, &url); err != nil {
			return "", "", err
		}
		return url, lastSegment(url), nil
	}
	var obj struct {
		URL  *string `json:"url"`
		Path *string `json:"path"`
	}
	if err := json.Unmarshal(item, &obj); err != nil {
		return "", "", fmt.Errorf("want a URL or an object with url and path: %w", err)
	}
	if obj.URL != nil {
		url = *obj.URL
	}
	if obj.Path != nil && *obj.Path != "" {
		return url, *obj.Path, nil
	}
	return url, lastSegment(url), nil
}
