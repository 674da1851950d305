package builder

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/moby/buildkit/frontend/dockerfile/parser"

	"github.com/swebuild/swebuild/builder/graph"
)

// affinityKeys gives every node its affinity group: nodes of one group are
// placed on one daemon of the pool (pool.place), so what they share is
// solved once and found in that daemon's cache.
//
//   - A node whose parent is built in this graph belongs to its parent's
//     group, unless the parent is a root of the graph (a base image): an
//     instance goes with its env, an env is a group of its own. So every
//     instance of an env lands where the env was built.
//   - A root (a base image, a flat v5 Dockerfile, a node whose parents are
//     bound to existing images) is grouped with the other roots of its
//     platform by the longest instruction prefix it shares with any of them
//     (from the parsed Dockerfile; instruction text with heredoc bodies),
//     cut after the last RUN, COPY or ADD of that prefix: tasks of one
//     repository whose Dockerfiles share the steps that install the
//     repository and its dependencies are one group. A root sharing no such
//     step is a group of its own.
//
// The second result maps each node index to the group of its parent ("" for
// roots), which place prefers on a tie. Keys include the platform.
func affinityKeys(nodes []*graph.Node, index map[string]int, given map[string]string) (keys, parentKeys []string) {
	n := len(nodes)
	keys, parentKeys = make([]string, n), make([]string, n)
	parentOf := make([]int, n)
	for i, node := range nodes {
		parentOf[i] = -1
		for _, pk := range node.Parents {
			if _, ok := givenRef(given, pk); ok {
				continue
			}
			if j, ok := index[pk+"@"+node.Platform.String()]; ok && j != i {
				parentOf[i] = j
				break
			}
		}
	}
	roots := prefixKeys(nodes, parentOf)
	var key func(i, depth int) string
	key = func(i, depth int) string {
		if keys[i] != "" {
			return keys[i]
		}
		j := parentOf[i]
		switch {
		case j < 0:
			keys[i] = roots[i]
		case parentOf[j] < 0 || depth > n:
			keys[i] = "node:" + nodes[i].ID()
		default:
			keys[i] = key(j, depth+1)
		}
		return keys[i]
	}
	for i := range nodes {
		key(i, 0)
	}
	for i := range nodes {
		if j := parentOf[i]; j >= 0 {
			parentKeys[i] = keys[j]
		}
	}
	return keys, parentKeys
}

// prefixKeys groups the roots (parentOf < 0) of each platform by the
// longest shared instruction prefix, through a trie of instructions.
func prefixKeys(nodes []*graph.Node, parentOf []int) map[int]string {
	type trie struct {
		count int
		next  map[string]*trie
	}
	out := map[int]string{}
	instrs := map[int][]string{}
	tries := map[string]*trie{}
	for i, n := range nodes {
		if parentOf[i] >= 0 {
			continue
		}
		ins := instructionTexts(n.Dockerfile)
		instrs[i] = ins
		t := tries[n.Platform.String()]
		if t == nil {
			t = &trie{next: map[string]*trie{}}
			tries[n.Platform.String()] = t
		}
		for _, in := range ins {
			c := t.next[in]
			if c == nil {
				c = &trie{next: map[string]*trie{}}
				t.next[in] = c
			}
			c.count++
			t = c
		}
	}
	for i, ins := range instrs {
		n := nodes[i]
		t := tries[n.Platform.String()]
		shared := 0 // instructions shared with another root, up to the last layer step
		for k, in := range ins {
			t = t.next[in]
			if t == nil || t.count < 2 {
				break
			}
			if layerStep(in) {
				shared = k + 1
			}
		}
		if shared == 0 {
			out[i] = "node:" + n.ID()
			continue
		}
		h := sha256.New()
		for _, in := range ins[:shared] {
			h.Write([]byte(in))
			h.Write([]byte{0})
		}
		out[i] = "prefix:" + n.Platform.String() + ":" + hex.EncodeToString(h.Sum(nil)[:12])
	}
	return out
}

// instructionTexts are the instructions of a Dockerfile as text (heredoc
// bodies included); a Dockerfile that does not parse is one instruction,
// its whole text.
func instructionTexts(df []byte) []string {
	res, err := parser.Parse(bytes.NewReader(df))
	if err != nil || res.AST == nil {
		return []string{string(df)}
	}
	var out []string
	for _, c := range res.AST.Children {
		s := c.Original
		for _, h := range c.Heredocs {
			s += "\n" + h.Content
		}
		out = append(out, s)
	}
	return out
}

// layerStep reports whether an instruction does work that a cache keeps.
func layerStep(in string) bool {
	f := strings.Fields(in)
	if len(f) == 0 {
		return false
	}
	switch strings.ToUpper(f[0]) {
	case "RUN", "COPY", "ADD":
		return true
	}
	return false
}
