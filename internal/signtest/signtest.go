// Package signtest changes signed statements the way an attacker with push
// rights could, for the tests that show they are refused: a statement
// changed by one byte and re-pushed in place of the signed one.
package signtest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/swebuild/swebuild/attest"
	"github.com/swebuild/swebuild/publication"
	"github.com/swebuild/swebuild/sign"
)

// Tamper returns bundle with one byte of its statement changed: the first
// digit of the predicate, so the statement stays valid JSON naming the
// same image and only the signature can tell.
func Tamper(bundle []byte) ([]byte, error) {
	var b map[string]any
	if err := json.Unmarshal(bundle, &b); err != nil {
		return nil, err
	}
	env, ok := b["dsseEnvelope"].(map[string]any)
	if !ok {
		return nil, errors.New("no DSSE envelope")
	}
	s, _ := env["payload"].(string)
	payload, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, err
	}
	start := bytes.Index(payload, []byte(`"predicate":`))
	if start < 0 {
		return nil, errors.New("no predicate in the statement")
	}
	i := bytes.IndexAny(payload[start:], "0123456789")
	if i < 0 {
		return nil, errors.New("no digit in the predicate")
	}
	i += start
	if payload[i] == '9' {
		payload[i] = '8'
	} else {
		payload[i]++
	}
	env["payload"] = base64.StdEncoding.EncodeToString(payload)
	return json.Marshal(b)
}

// Repush replaces, in repo, the signed statement of predicateType attached
// to subject with the same bundle changed by one byte (Tamper): the
// tampered bundle is attached and the original superseded (out of the
// fallback index, its attachment tag a tombstone), as a writer with push
// rights could do. It returns the tampered referrer's digest.
func Repush(ctx context.Context, refs *attest.Referrers, repo name.Repository, subject v1.Descriptor, predicateType string) (v1.Hash, error) {
	r := publication.New(refs.Client)
	list, err := r.Referrers(ctx, repo, subject.Digest)
	if err != nil {
		return v1.Hash{}, err
	}
	bundles, err := sign.ReadBundles(ctx, r, repo, list)
	if err != nil {
		return v1.Hash{}, err
	}
	for _, b := range bundles {
		if b.PredicateType != predicateType {
			continue
		}
		bad, err := Tamper(b.JSON)
		if err != nil {
			return v1.Hash{}, err
		}
		a, err := sign.Artifact(subject, predicateType, bad, time.Time{})
		if err != nil {
			return v1.Hash{}, err
		}
		if err := refs.Attach(ctx, repo, a); err != nil {
			return v1.Hash{}, err
		}
		if _, err := refs.Supersede(ctx, repo, subject.Digest, []v1.Hash{a.Descriptor.Digest}); err != nil {
			return v1.Hash{}, err
		}
		return a.Descriptor.Digest, nil
	}
	return v1.Hash{}, fmt.Errorf("%s@%s has no signed %s statement to tamper with", repo, subject.Digest, predicateType)
}
