// Package sbom holds the resolved environment of an image: the packages
// its profile's listing commands (pip freeze --all, conda list --explicit
// --md5, dpkg-query) print inside it, parsed into Package values, and the
// Document that carries them with the image's identity as a CycloneDX 1.6
// JSON SBOM, the payload of the OCI artifact swebuild attaches to every
// env and instance image (artifactType MediaType).
//
// The package does no I/O: builder runs the listings and publish moves the
// bytes; drift compares two Documents by Package.Key.
package sbom

import (
	"bytes"
	"crypto/sha256"
	"encoding"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	cdx "github.com/CycloneDX/cyclonedx-go"
	"github.com/package-url/packageurl-go"

	"github.com/swebuild/swebuild/core"
)

// MediaType is the media type of the document, and the artifactType of the
// OCI artifact carrying it.
const MediaType = "application/vnd.cyclonedx+json"

// Ecosystems (Package.Ecosystem); each is also its purl type.
const (
	PyPI  = "pypi"
	Conda = "conda"
	Deb   = "deb"
)

// Document is the resolved environment of one image.
type Document struct {
	Subject  string // image manifest digest "sha256:..."
	Kind     string // "env" or "instance"
	Image    string // image name, e.g. sweb.env.py.x86_64.<hash> or sweb.eval.x86_64.<id>
	Platform core.Platform
	// Repo and Version are the spec identity (repo and version of the
	// instances the image serves).
	Repo, Version string
	// InstanceIDs: the instance (instance image) or every instance the env
	// serves.
	InstanceIDs []string
	SpecKey     string
	Packages    []Package // sorted by Key, then Version
}

// Metadata property names (CycloneDX metadata.properties).
const (
	propSubject    = "swebuild:subject"
	propKind       = "swebuild:kind"
	propImage      = "swebuild:image"
	propPlatform   = "swebuild:platform"
	propRepo       = "swebuild:repo"
	propVersion    = "swebuild:version"
	propInstanceID = "swebuild:instance_id" // one property per instance
	propSpecKey    = "swebuild:spec_key"
	propURL        = "swebuild:url" // a component's Package.URL
)

// purl returns p's package URL: pkg:pypi/NAME@VERSION,
// pkg:deb/debian/NAME@VERSION?arch=ARCH,
// pkg:conda/NAME@VERSION?build=&channel=&subdir=&type=.
func (p Package) purl() string {
	var ns string
	var q packageurl.Qualifiers
	switch p.Ecosystem {
	case Deb:
		ns = "debian"
		if p.Arch != "" {
			q = append(q, packageurl.Qualifier{Key: "arch", Value: p.Arch})
		}
	case Conda:
		if p.Build != "" {
			q = append(q, packageurl.Qualifier{Key: "build", Value: p.Build})
		}
		if ch := condaChannel(p.URL, p.Arch); ch != "" {
			q = append(q, packageurl.Qualifier{Key: "channel", Value: ch})
		}
		if p.Arch != "" {
			q = append(q, packageurl.Qualifier{Key: "subdir", Value: p.Arch})
		}
		switch {
		case strings.HasSuffix(p.URL, ".conda"):
			q = append(q, packageurl.Qualifier{Key: "type", Value: "conda"})
		case strings.HasSuffix(p.URL, ".tar.bz2"):
			q = append(q, packageurl.Qualifier{Key: "type", Value: "tar.bz2"})
		}
	}
	return packageurl.NewPackageURL(p.Ecosystem, ns, p.Name, p.Version, q, "").ToString()
}

// condaChannel is the channel URL of a conda package URL (what precedes
// /SUBDIR/FILE).
func condaChannel(u, subdir string) string {
	i := strings.LastIndex(u, "/")
	if i < 0 {
		return ""
	}
	ch := u[:i]
	if subdir != "" {
		ch = strings.TrimSuffix(ch, "/"+subdir)
	}
	return ch
}

// field is one of a Document's one-valued fields and the metadata property
// that holds it, as text (encoding.TextMarshaler and TextUnmarshaler).
type field struct {
	name  string
	value interface {
		encoding.TextMarshaler
		encoding.TextUnmarshaler
	}
}

// text is a string field as a TextMarshaler and TextUnmarshaler.
type text string

func (t text) MarshalText() ([]byte, error) { return []byte(t), nil }

func (t *text) UnmarshalText(b []byte) error {
	*t = text(b)
	return nil
}

// fields are d's one-valued fields, in the order CycloneDX writes their
// properties (and Decode reads them back by name).
func (d *Document) fields() []field {
	return []field{
		{propSubject, (*text)(&d.Subject)},
		{propKind, (*text)(&d.Kind)},
		{propImage, (*text)(&d.Image)},
		{propPlatform, &d.Platform},
		{propRepo, (*text)(&d.Repo)},
		{propVersion, (*text)(&d.Version)},
		{propSpecKey, (*text)(&d.SpecKey)},
	}
}

// CycloneDX encodes d as a CycloneDX 1.6 JSON document: one component
// (with its purl) per package, d's identity as metadata properties
// "swebuild:*" and the image as the metadata component. The bytes depend
// on d alone (no timestamp; the serial number is derived from the
// content).
func (d *Document) CycloneDX() ([]byte, error) {
	pkgs := slices.Clone(d.Packages)
	Sort(pkgs)
	bom := cdx.NewBOM()
	var props []cdx.Property
	for _, f := range d.fields() {
		v, err := f.value.MarshalText()
		if err != nil {
			return nil, fmt.Errorf("encoding a CycloneDX document: %s: %w", f.name, err)
		}
		props = append(props, cdx.Property{Name: f.name, Value: string(v)})
	}
	for _, id := range d.InstanceIDs {
		props = append(props, cdx.Property{Name: propInstanceID, Value: id})
	}
	bom.Metadata = &cdx.Metadata{
		Component: &cdx.Component{
			BOMRef: "image", Type: cdx.ComponentTypeContainer, Name: d.Image, Version: d.Subject,
		},
		Properties: &props,
	}
	comps := make([]cdx.Component, 0, len(pkgs))
	refs := map[string]int{}
	for _, p := range pkgs {
		if p.Ecosystem == "" || p.Name == "" {
			return nil, fmt.Errorf("encoding the SBOM of %s: a package with no ecosystem or name (%+v)", d.Image, p)
		}
		purl := p.purl()
		ref := purl
		if n := refs[purl]; n > 0 {
			ref = fmt.Sprintf("%s#%d", purl, n)
		}
		refs[purl]++
		c := cdx.Component{BOMRef: ref, Type: cdx.ComponentTypeLibrary, Name: p.Name, Version: p.Version, PackageURL: purl}
		if alg, hexv, ok := strings.Cut(p.Checksum, ":"); ok {
			a, err := hashAlg(alg)
			if err != nil {
				return nil, fmt.Errorf("encoding the SBOM of %s: package %s: %w", d.Image, p.Key(), err)
			}
			c.Hashes = &[]cdx.Hash{{Algorithm: a, Value: hexv}}
		}
		if p.URL != "" {
			c.Properties = &[]cdx.Property{{Name: propURL, Value: p.URL}}
			if p.Ecosystem == Conda {
				c.ExternalReferences = &[]cdx.ExternalReference{{Type: cdx.ERTypeDistribution, URL: p.URL}}
			}
		}
		comps = append(comps, c)
	}
	bom.Components = &comps

	encode := func() ([]byte, error) {
		var buf bytes.Buffer
		enc := cdx.NewBOMEncoder(&buf, cdx.BOMFileFormatJSON)
		enc.SetEscapeHTML(false)
		if err := enc.EncodeVersion(bom, cdx.SpecVersion1_6); err != nil {
			return nil, fmt.Errorf("encoding the SBOM of %s: %w", d.Image, err)
		}
		return buf.Bytes(), nil
	}
	raw, err := encode()
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(raw)
	sum[6] = sum[6]&0x0f | 0x50 // a name-based UUID (version 5 layout)
	sum[8] = sum[8]&0x3f | 0x80
	h := hex.EncodeToString(sum[:16])
	bom.SerialNumber = "urn:uuid:" + h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
	return encode()
}

var hashAlgs = map[string]cdx.HashAlgorithm{
	"md5": cdx.HashAlgoMD5, "sha1": cdx.HashAlgoSHA1, "sha256": cdx.HashAlgoSHA256, "sha512": cdx.HashAlgoSHA512,
}

func hashAlg(name string) (cdx.HashAlgorithm, error) {
	if a, ok := hashAlgs[name]; ok {
		return a, nil
	}
	return "", fmt.Errorf("unknown checksum algorithm %q", name)
}

// Decode reads a CycloneDX JSON document: one made by CycloneDX (it
// round-trips), or one made by another tool, whose components with a
// pypi, conda or deb purl become Packages (other components are skipped)
// and whose Document fields are empty where it has no swebuild:* property.
func Decode(raw []byte) (*Document, error) {
	var bom cdx.BOM
	if err := cdx.NewBOMDecoder(bytes.NewReader(raw), cdx.BOMFileFormatJSON).Decode(&bom); err != nil {
		return nil, fmt.Errorf("decoding a CycloneDX document: %w", err)
	}
	if bom.BOMFormat != cdx.BOMFormat {
		return nil, fmt.Errorf("decoding a CycloneDX document: bomFormat is %q, want %q", bom.BOMFormat, cdx.BOMFormat)
	}
	d := &Document{}
	if m := bom.Metadata; m != nil {
		if m.Component != nil {
			d.Image = m.Component.Name
			if strings.HasPrefix(m.Component.Version, "sha256:") {
				d.Subject = m.Component.Version
			}
		}
		if m.Properties != nil {
			fields := d.fields()
			for _, p := range *m.Properties {
				if p.Name == propInstanceID {
					d.InstanceIDs = append(d.InstanceIDs, p.Value)
				} else if i := slices.IndexFunc(fields, func(f field) bool { return f.name == p.Name }); i >= 0 {
					if err := fields[i].value.UnmarshalText([]byte(p.Value)); err != nil {
						return nil, fmt.Errorf("decoding a CycloneDX document: property %s: %w", p.Name, err)
					}
				}
			}
		}
	}
	if bom.Components != nil {
		for i, c := range *bom.Components {
			p, ok, err := componentPackage(c)
			if err != nil {
				return nil, fmt.Errorf("decoding a CycloneDX document: component %d (%s): %w", i, c.Name, err)
			}
			if ok {
				d.Packages = append(d.Packages, p)
			}
		}
	}
	Sort(d.Packages)
	return d, nil
}

func componentPackage(c cdx.Component) (Package, bool, error) {
	if c.PackageURL == "" {
		return Package{}, false, nil
	}
	pu, err := packageurl.FromString(c.PackageURL)
	if err != nil {
		return Package{}, false, fmt.Errorf("reading purl %q: %w", c.PackageURL, err)
	}
	q := pu.Qualifiers.Map()
	p := Package{Ecosystem: pu.Type, Name: pu.Name, Version: pu.Version}
	switch pu.Type {
	case PyPI:
		p.Name = NormalizePyPI(pu.Name)
	case Deb:
		p.Arch = q["arch"]
	case Conda:
		p.Arch, p.Build = q["subdir"], q["build"]
	default:
		return Package{}, false, nil
	}
	if p.Version == "" {
		p.Version = c.Version
	}
	if c.Properties != nil {
		for _, pr := range *c.Properties {
			if pr.Name == propURL {
				p.URL = pr.Value
			}
		}
	}
	if p.URL == "" && c.ExternalReferences != nil {
		for _, r := range *c.ExternalReferences {
			if r.Type == cdx.ERTypeDistribution {
				p.URL = r.URL
				break
			}
		}
	}
	if c.Hashes != nil {
		for _, h := range *c.Hashes {
			for name, a := range hashAlgs {
				if h.Algorithm == a && (p.Checksum == "" || name == "md5") {
					p.Checksum = name + ":" + strings.ToLower(h.Value)
				}
			}
		}
	}
	return p, true, nil
}
