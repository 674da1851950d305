package main

import (
	"strings"

	"github.com/spf13/pflag"

	"github.com/swebuild/swebuild/core"
)

// platformsValue is a --platform flag: platforms in any spelling
// core.ParsePlatform reads, repeated or comma-separated, parsed as the flag
// is set (the door: a bad value is pflag's error naming the flag). Like a
// string slice flag, the first use replaces the default and the next ones
// append; the order given is kept.
type platformsValue struct {
	list    *[]core.Platform
	changed bool
}

// platformsVar registers a --platform flag (name) with a default.
func platformsVar(fs *pflag.FlagSet, list *[]core.Platform, name string, def []core.Platform, usage string) {
	*list = append([]core.Platform(nil), def...)
	fs.Var(&platformsValue{list: list}, name, usage)
}

func (v *platformsValue) Set(s string) error {
	if !v.changed {
		*v.list = nil
		v.changed = true
	}
	for _, e := range strings.Split(s, ",") {
		if strings.TrimSpace(e) == "" {
			continue
		}
		p, err := core.ParsePlatform(e)
		if err != nil {
			return err
		}
		*v.list = append(*v.list, p)
	}
	return nil
}

// String is how pflag shows the default: as a string slice flag does, and
// "" for no platforms (a flag whose default is decided later, such as
// verify's host platform: pflag then shows no default).
func (v *platformsValue) String() string {
	if v.list == nil || len(*v.list) == 0 {
		return ""
	}
	s := make([]string, len(*v.list))
	for i, p := range *v.list {
		s[i] = p.String()
	}
	return "[" + strings.Join(s, ",") + "]"
}

// Type is a string slice flag's, so the usage reads "--platform strings".
func (v *platformsValue) Type() string { return "stringSlice" }
