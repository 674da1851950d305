// Package govalidator stands in for github.com/asaskevich/govalidator in
// swebuild's build (go.mod's replace directive): of its API the module
// graph calls IsEmail only, from rekor's pkg/pki (x509, pgp, ssh), which
// sigstore-go links for Rekor entries. The real package compiles some 40
// regular expressions at init, 6-7 ms of every swebuild process's start-up
// whatever the command (GODEBUG=inittrace=1 swebuild --version; issue 27).
// Rekor calls IsEmail to pick the e-mail addresses of a key or certificate
// for its server's search index; neither signing nor verification in
// sigstore-go reaches it. A build that needs another function of the real
// package fails to compile instead of changing behaviour.
package govalidator

import (
	"net/mail"
	"strings"
)

// IsEmail reports whether s is a bare e-mail address, local@domain with a
// dot in the domain (RFC 5322's addr-spec as net/mail parses it; no display
// name, no angle brackets), as the real IsEmail accepts.
func IsEmail(s string) bool {
	a, err := mail.ParseAddress(s)
	if err != nil || a.Address != s {
		return false
	}
	at := strings.LastIndexByte(s, '@')
	domain := s[at+1:]
	return strings.Contains(domain, ".") && !strings.HasPrefix(domain, ".") && !strings.HasSuffix(domain, ".")
}
