package registry

import (
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
)

// realmPrefix is the path under which a registry's token realm on another
// port of the same private host is reached (see realmRoute).
const realmPrefix = "/.swebuild-token-realm/"

// realmRoute lets go-containerregistry log in to a registry on a private
// address whose token server is on another port of the same host (a
// registry on 127.0.0.1:5000 with realm http://127.0.0.1:5001/token, as a
// local htpasswd+token setup has). ggcr refuses any realm on a private
// address other than the registry's own host:port (its SSRF guard, issue
// 20 row 7). The realm is on the very host the registry is, so nothing new
// is reached: the challenge's realm is rewritten to a path on the
// registry's host:port, and requests to that path are sent to the realm's
// port. Realms on other hosts, or changing the scheme, are left as they
// are (and ggcr refuses the private ones).
type realmRoute struct {
	next http.RoundTripper
}

var realmParam = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?i)(\brealm=")([^"]*)(")`) })

func (r realmRoute) RoundTrip(req *http.Request) (*http.Response, error) {
	if rest, ok := strings.CutPrefix(req.URL.Path, realmPrefix); ok && privateHost(req.URL.Hostname()) {
		port, path, _ := strings.Cut(rest, "/")
		if validPort(port) {
			out := req.Clone(req.Context())
			out.URL.Host = net.JoinHostPort(req.URL.Hostname(), port)
			out.URL.Path = "/" + path
			out.URL.RawPath = ""
			out.Host = ""
			return r.next.RoundTrip(out)
		}
	}
	resp, err := r.next.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusUnauthorized || !privateHost(req.URL.Hostname()) {
		return resp, err
	}
	vals := resp.Header.Values("Www-Authenticate")
	for i, v := range vals {
		vals[i] = realmParam().ReplaceAllStringFunc(v, func(m string) string {
			sub := realmParam().FindStringSubmatch(m)
			u, perr := url.Parse(sub[2])
			if perr != nil || u.Scheme != req.URL.Scheme || u.Hostname() != req.URL.Hostname() || u.Host == req.URL.Host || u.Port() == "" {
				return m
			}
			nu := *u
			nu.Host = req.URL.Host
			nu.Path = realmPrefix + u.Port() + u.Path
			nu.RawPath = ""
			return sub[1] + nu.String() + sub[3]
		})
	}
	return resp, nil
}

// privateHost reports whether host is an IP literal on loopback, a private
// or a link-local range: the addresses ggcr's realm check refuses.
func privateHost(host string) bool {
	ip := net.ParseIP(host)
	return ip != nil && (ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast())
}

func validPort(p string) bool {
	if p == "" || len(p) > 5 {
		return false
	}
	for _, c := range p {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
