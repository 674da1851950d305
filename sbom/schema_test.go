package sbom

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// cyclonedxSchemaDir is the schema directory of the cyclonedx-go module
// go.mod requires (in the module cache): the CycloneDX
// project's own JSON schemas.
func cyclonedxSchemaDir(t *testing.T) string {
	t.Helper()
	mod, err := os.ReadFile(filepath.Join("..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*github\.com/CycloneDX/cyclonedx-go (v\S+)`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("go.mod requires no github.com/CycloneDX/cyclonedx-go")
	}
	version := string(m[1])
	roots := []string{os.Getenv("GOMODCACHE")}
	if gp := os.Getenv("GOPATH"); gp != "" {
		roots = append(roots, filepath.Join(gp, "pkg", "mod"))
	}
	if home, err := os.UserHomeDir(); err == nil {
		roots = append(roots, filepath.Join(home, "go", "pkg", "mod"))
	}
	for _, r := range roots {
		dir := filepath.Join(r, "github.com", "!cyclone!d!x", "cyclonedx-go@"+version, "schema")
		if r != "" && version != "" {
			if _, err := os.Stat(filepath.Join(dir, "bom-1.6.schema.json")); err == nil {
				return dir
			}
		}
	}
	t.Fatalf("the CycloneDX 1.6 schema of cyclonedx-go %s is not in the module cache (%v)", version, roots)
	return ""
}

// TestCycloneDXSchema validates the document of the fixture's listings
// against the CycloneDX project's JSON schema for 1.6 (draft-07, with the
// SPDX license and JSF signature schemas it refers to).
func TestCycloneDXSchema(t *testing.T) {
	dir := cyclonedxSchemaDir(t)
	c := jsonschema.NewCompiler()
	for url, file := range map[string]string{
		"http://cyclonedx.org/schema/bom-1.6.schema.json":  "bom-1.6.schema.json",
		"http://cyclonedx.org/schema/spdx.schema.json":     "spdx.schema.json",
		"http://cyclonedx.org/schema/jsf-0.82.schema.json": "jsf-0.82.schemax.json",
	} {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if err := c.AddResource(url, doc); err != nil {
			t.Fatal(err)
		}
	}
	sch, err := c.Compile("http://cyclonedx.org/schema/bom-1.6.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := fixtureDocument(t).CycloneDX()
	if err != nil {
		t.Fatal(err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if err := sch.Validate(inst); err != nil {
		t.Fatalf("the document is not valid CycloneDX 1.6: %v", err)
	}
	// The schema does reject what is not CycloneDX 1.6.
	bad, _ := jsonschema.UnmarshalJSON(strings.NewReader(strings.Replace(string(raw), `"type":"library"`, `"type":"pkg"`, 1)))
	if err := sch.Validate(bad); err == nil {
		t.Error("a component type outside the schema's enum passed")
	}
}
