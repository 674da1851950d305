package grading

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"
)

// parseDoctest is upstream's parse_log_doctest (c.py): the text from the
// first "<doctest" to the first "</doctest>" after it is parsed with
// xml.etree.ElementTree.fromstring; every SubCase below every TestCase
// below the root gives "<TestCase name> > <SubCase name>", PASSED when every
// Expression below the SubCase has success="true" (vacuously so when it has
// none), FAILED otherwise. A nested SubCase is listed under its TestCase
// too, so it appears twice when its outer SubCase has the same name; a
// TestCase without SubCase gives nothing.
//
// When "<doctest" occurs without a later "</doctest>", upstream computes
// end_index = -1 + len("</doctest>") = 9 and parses log[start:9], which is
// never a document: ElementTree raises, and so does this parser. XML that
// expat (ElementTree's parser, with namespace processing) rejects makes it
// raise as well.
func parseDoctest(log string, sm *StatusMap) error {
	const startTag, endTag = "<doctest", "</doctest>"
	start := strings.Index(log, startTag)
	if start < 0 {
		return nil
	}
	end := strings.Index(log[start:], endTag)
	if end < 0 {
		return fmt.Errorf("parse_log_doctest: %q without a later %q: ElementTree.fromstring raises ParseError: %w",
			startTag, endTag, ErrUpstreamParserRaises)
	}
	doc := log[start : start+end+len(endTag)]
	root, err := parseXMLTree(doc)
	if err != nil {
		return fmt.Errorf("parse_log_doctest: ElementTree.fromstring raises ParseError (%v): %w", err, ErrUpstreamParserRaises)
	}
	for _, tc := range root.descendants("TestCase") {
		tcName := tc.attr(doc, "name")
		for _, sc := range tc.descendants("SubCase") {
			status := StatusPassed
			for _, ex := range sc.descendants("Expression") {
				if v, ok := ex.attrValue(doc, "success"); !ok || v != "true" {
					status = StatusFailed
					break
				}
			}
			sm.set(tcName+" > "+sc.attr(doc, "name"), status)
		}
	}
	return nil
}

// xmlNode is an element of a parsed document: its expanded name (as
// ElementTree's tag: a namespace URI, "" for none, and the local name), its
// unprefixed attributes as the Go decoder returned them, and where its start
// tag lies in the document (to normalize attribute values, see attrValue).
type xmlNode struct {
	ns, local  string
	attrs      []xml.Attr
	tagStart   int
	tagEnd     int
	children   []*xmlNode
	parent     *xmlNode
	namespaces map[string]string // prefix -> URI in scope ("" the default)
}

// descendants is ElementTree's findall(".//" + local) for an un-namespaced
// tag: every element below n (not n itself) in document order.
func (n *xmlNode) descendants(local string) []*xmlNode {
	var out []*xmlNode
	var walk func(*xmlNode)
	walk = func(e *xmlNode) {
		for _, c := range e.children {
			if c.ns == "" && c.local == local {
				out = append(out, c)
			}
			walk(c)
		}
	}
	walk(n)
	return out
}

// attr is ElementTree's Element.get(name) formatted by an f-string: the
// attribute's value, or "None" when the element has no such attribute.
func (n *xmlNode) attr(doc, name string) string {
	if v, ok := n.attrValue(doc, name); ok {
		return v
	}
	return "None"
}

// attrValue returns the value of the unprefixed attribute name as expat
// reports it: literal tabs and newlines in the value become spaces
// (attribute-value normalization); character references stay as they are.
// Go's decoder does not normalize, so a value holding a tab or newline is
// read again from the start tag's text.
func (n *xmlNode) attrValue(doc, name string) (string, bool) {
	for _, a := range n.attrs {
		if a.Name.Space != "" || a.Name.Local != name {
			continue
		}
		if !strings.ContainsAny(a.Value, "\t\n") {
			return a.Value, true
		}
		if raw, ok := rawAttr(doc[n.tagStart:n.tagEnd], name); ok {
			return normalizeAttr(raw), true
		}
		return a.Value, true
	}
	return "", false
}

// decodeXMLRef returns the text of the reference &ref; (one the Go decoder
// has accepted: a predefined entity or a character reference).
func decodeXMLRef(ref string) string {
	switch ref {
	case "lt":
		return "<"
	case "gt":
		return ">"
	case "amp":
		return "&"
	case "quot":
		return `"`
	case "apos":
		return "'"
	}
	base, digits := 10, strings.TrimPrefix(ref, "#")
	if strings.HasPrefix(digits, "x") {
		base, digits = 16, digits[1:]
	}
	v, err := strconv.ParseUint(digits, base, 32)
	if err != nil || v > unicode.MaxRune {
		return "&" + ref + ";"
	}
	return string(rune(v))
}

// rawAttr finds the undecoded value of attribute name in a start tag the Go
// decoder has accepted.
func rawAttr(tag, name string) (string, bool) {
	i := strings.IndexAny(tag, " \t\n\r/>")
	for i >= 0 && i < len(tag) {
		for i < len(tag) && strings.IndexByte(" \t\n\r", tag[i]) >= 0 {
			i++
		}
		if i >= len(tag) || tag[i] == '/' || tag[i] == '>' {
			return "", false
		}
		j := i
		for j < len(tag) && strings.IndexByte(" \t\n\r=", tag[j]) < 0 {
			j++
		}
		attrName := tag[i:j]
		for j < len(tag) && tag[j] != '"' && tag[j] != '\'' {
			j++
		}
		if j >= len(tag) {
			return "", false
		}
		q := tag[j]
		k := strings.IndexByte(tag[j+1:], q)
		if k < 0 {
			return "", false
		}
		if attrName == name {
			return tag[j+1 : j+1+k], true
		}
		i = j + 1 + k + 1
	}
	return "", false
}

// normalizeAttr applies XML attribute-value normalization to a raw value
// and decodes its references (already checked by the Go decoder).
func normalizeAttr(raw string) string {
	var b strings.Builder
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case c == '\t' || c == '\n' || c == '\r':
			b.WriteByte(' ')
		case c == '&':
			j := strings.IndexByte(raw[i:], ';')
			if j < 0 {
				b.WriteString(raw[i:])
				return b.String()
			}
			b.WriteString(decodeXMLRef(raw[i+1 : i+j]))
			i += j
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// parseXMLTree parses doc as ElementTree.fromstring would (expat with
// namespace processing) and returns the root element, or an error where
// expat reports one. Beyond what Go's strict decoder checks, it checks what
// expat does and Go does not: matching end tags, one root element and
// nothing but comments, processing instructions and whitespace after it, no
// DOCTYPE or other declaration inside the document, no misplaced XML
// declaration, well-formed comments, no duplicate attributes, and bound
// namespace prefixes.
func parseXMLTree(doc string) (*xmlNode, error) {
	d := xml.NewDecoder(strings.NewReader(doc))
	d.Strict = true
	var tb xmlTreeBuilder
	for {
		before := int(d.InputOffset())
		tok, err := d.RawToken()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		raw := doc[before:int(d.InputOffset())]
		switch t := tok.(type) {
		case xml.StartElement:
			err = tb.start(t, raw, before)
		case xml.EndElement:
			err = tb.end(t)
		case xml.CharData:
			err = tb.charData(t, raw)
		default:
			err = checkXMLMisc(tok)
		}
		if err != nil {
			return nil, err
		}
	}
	if tb.root == nil || len(tb.stack) > 0 {
		return nil, errors.New("no element found / unclosed element")
	}
	return tb.root, nil
}

// xmlTreeBuilder is parseXMLTree's state: the root, the open element and
// the names of the open elements.
type xmlTreeBuilder struct {
	root, cur *xmlNode
	stack     []xml.Name
}

// start opens element t, whose raw start tag begins at offset before.
// A self-closing tag is followed by a synthesized end element.
func (tb *xmlTreeBuilder) start(t xml.StartElement, raw string, before int) error {
	if tb.root != nil && tb.cur == nil {
		return errors.New("junk after document element")
	}
	if err := checkAttrSeparation(raw); err != nil {
		return err
	}
	if err := checkCharRefs(raw); err != nil {
		return err
	}
	n := &xmlNode{tagStart: before, tagEnd: before + len(raw), parent: tb.cur}
	if err := n.bind(t); err != nil {
		return err
	}
	if tb.cur == nil {
		tb.root = n
	} else {
		tb.cur.children = append(tb.cur.children, n)
	}
	tb.cur = n
	tb.stack = append(tb.stack, t.Name)
	return nil
}

// end closes the open element, which must be t.
func (tb *xmlTreeBuilder) end(t xml.EndElement) error {
	if len(tb.stack) == 0 {
		return errors.New("junk after document element")
	}
	if top := tb.stack[len(tb.stack)-1]; top != t.Name {
		return fmt.Errorf("mismatched tag: <%s> closed by </%s>", qname(top), qname(t.Name))
	}
	tb.stack = tb.stack[:len(tb.stack)-1]
	tb.cur = tb.cur.parent
	return nil
}

// charData checks text: its character references, and only whitespace
// outside the root element.
func (tb *xmlTreeBuilder) charData(t xml.CharData, raw string) error {
	if !strings.HasPrefix(raw, "<![CDATA[") {
		if err := checkCharRefs(raw); err != nil {
			return err
		}
	}
	if tb.cur == nil && strings.Trim(string(t), " \t\r\n") != "" {
		return errors.New("junk after document element")
	}
	return nil
}

// checkXMLMisc checks a comment, processing instruction or declaration.
func checkXMLMisc(tok xml.Token) error {
	switch t := tok.(type) {
	case xml.Comment:
		if strings.Contains(string(t), "--") || strings.HasSuffix(string(t), "-") {
			return errors.New(`"--" inside a comment`)
		}
		return checkXMLChars(string(t))
	case xml.ProcInst:
		if strings.EqualFold(t.Target, "xml") {
			return errors.New("XML declaration not at the start of the document")
		}
		return checkXMLChars(string(t.Inst))
	case xml.Directive:
		return errors.New("declaration inside the document")
	}
	return nil
}

// checkAttrSeparation checks what Go's decoder lets pass in a start tag:
// every attribute value must be followed by whitespace, "/" or ">"
// (`a="1"b="2"` is not well-formed).
func checkAttrSeparation(tag string) error {
	for i := 0; i < len(tag); i++ {
		q := tag[i]
		if q != '"' && q != '\'' {
			continue
		}
		k := strings.IndexByte(tag[i+1:], q)
		if k < 0 {
			return nil
		}
		i += 1 + k
		if i+1 < len(tag) && strings.IndexByte(" \t\n\r/>", tag[i+1]) < 0 {
			return fmt.Errorf("no whitespace after attribute value at %q", tag[i:])
		}
	}
	return nil
}

// checkXMLChars checks that s holds only XML characters (Go checks text and
// attribute values, not comments and processing instructions).
func checkXMLChars(s string) error {
	for _, r := range s {
		if !(r == 0x09 || r == 0x0a || r == 0x0d || r >= 0x20 && r <= 0xd7ff ||
			r >= 0xe000 && r <= 0xfffd || r >= 0x10000 && r <= 0x10ffff) {
			return fmt.Errorf("illegal character %U", r)
		}
	}
	return nil
}

// checkCharRefs checks the character references of raw text or a raw
// start tag: Go turns a reference to a surrogate (&#xD800;) into U+FFFD,
// expat rejects it ("reference to invalid character number").
func checkCharRefs(raw string) error {
	for {
		i := strings.Index(raw, "&#")
		if i < 0 {
			return nil
		}
		raw = raw[i+2:]
		j := strings.IndexByte(raw, ';')
		if j < 0 {
			return nil
		}
		digits, base := raw[:j], 10
		if strings.HasPrefix(digits, "x") {
			digits, base = digits[1:], 16
		}
		if v, err := strconv.ParseUint(digits, base, 32); err == nil && v >= 0xd800 && v <= 0xdfff {
			return fmt.Errorf("reference to invalid character number &#%s;", raw[:j])
		}
	}
}

// bind resolves the element's and its attributes' namespace prefixes (the
// element's own xmlns declarations included) and checks for duplicates.
func (n *xmlNode) bind(t xml.StartElement) error {
	n.namespaces = map[string]string{}
	if n.parent != nil {
		for k, v := range n.parent.namespaces {
			n.namespaces[k] = v
		}
	}
	// Go keeps a name with a leading or trailing ":" as a local name;
	// expat with namespace processing rejects it.
	if strings.Contains(t.Name.Local, ":") {
		return fmt.Errorf("invalid element name %q", qname(t.Name))
	}
	seen := map[xml.Name]bool{}
	for _, a := range t.Attr {
		if strings.Contains(a.Name.Local, ":") {
			return fmt.Errorf("invalid attribute name %q", qname(a.Name))
		}
		if seen[a.Name] {
			return fmt.Errorf("duplicate attribute %s", qname(a.Name))
		}
		seen[a.Name] = true
		if err := n.declare(a); err != nil {
			return err
		}
	}
	if t.Name.Space == "xmlns" {
		return fmt.Errorf("reserved prefix xmlns on element %s", qname(t.Name))
	}
	ns, err := n.resolve(t.Name.Space, true)
	if err != nil {
		return err
	}
	n.ns, n.local = ns, t.Name.Local
	return n.bindAttrs(t.Attr)
}

// declare takes a namespace declaration (xmlns:p="..." or xmlns="...")
// into the element's namespaces, refusing reserved prefixes and
// namespaces; other attributes are left alone.
func (n *xmlNode) declare(a xml.Attr) error {
	switch {
	case a.Name.Space == "xmlns":
		switch {
		case a.Value == "":
			return fmt.Errorf("prefix %s bound to an empty namespace", a.Name.Local)
		case a.Name.Local == "xml" && a.Value != xmlNamespace,
			a.Name.Local == "xmlns",
			a.Name.Local != "xml" && (a.Value == xmlNamespace || a.Value == xmlnsNamespace):
			return fmt.Errorf("reserved prefix or namespace in xmlns:%s=%q", a.Name.Local, a.Value)
		}
		n.namespaces[a.Name.Local] = a.Value
	case a.Name.Space == "" && a.Name.Local == "xmlns":
		if a.Value == xmlNamespace || a.Value == xmlnsNamespace {
			return fmt.Errorf("reserved namespace in xmlns=%q", a.Value)
		}
		n.namespaces[""] = a.Value
	}
	return nil
}

// bindAttrs resolves the attributes' prefixes, refuses two that expand to
// the same name, and keeps those without a namespace.
func (n *xmlNode) bindAttrs(attrs []xml.Attr) error {
	expanded := map[xml.Name]bool{}
	for _, a := range attrs {
		if a.Name.Space == "xmlns" || (a.Name.Space == "" && a.Name.Local == "xmlns") {
			continue
		}
		ans, err := n.resolve(a.Name.Space, false)
		if err != nil {
			return err
		}
		e := xml.Name{Space: ans, Local: a.Name.Local}
		if expanded[e] {
			return fmt.Errorf("duplicate attribute %s", qname(a.Name))
		}
		expanded[e] = true
		if ans == "" {
			n.attrs = append(n.attrs, a)
		}
	}
	return nil
}

// resolve maps a prefix to its namespace URI; unprefixed attributes have no
// namespace, unprefixed elements the default one.
func (n *xmlNode) resolve(prefix string, element bool) (string, error) {
	switch {
	case prefix == "":
		if element {
			return n.namespaces[""], nil
		}
		return "", nil
	case prefix == "xml":
		return xmlNamespace, nil
	}
	uri, ok := n.namespaces[prefix]
	if !ok {
		return "", fmt.Errorf("unbound prefix %q", prefix)
	}
	return uri, nil
}

// The namespaces the "xml" and "xmlns" prefixes are bound to.
const (
	xmlNamespace   = "http://www.w3.org/XML/1998/namespace"
	xmlnsNamespace = "http://www.w3.org/2000/xmlns/"
)

func qname(n xml.Name) string {
	if n.Space == "" {
		return n.Local
	}
	return n.Space + ":" + n.Local
}
