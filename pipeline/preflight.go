package pipeline

import (
	"context"
	"errors"
	"fmt"

	"github.com/swebuild/swebuild/publish"
	"github.com/swebuild/swebuild/registry"
)

// checkTargets checks, before anything is solved, that every registry the
// build writes to answers and accepts the credential for a push: the push
// repository (Builder.Push, with the builder's credentials) and, with
// Publish, the repositories the publish writes first (publish.Targets of
// ids, with the publish's). A registry that is down or refuses the login
// fails the build in seconds, naming the host and where the credential
// was looked for, instead of at the first export after the whole solve.
func checkTargets(ctx context.Context, o BuildOptions, ids []string) error {
	var errs []error
	if o.Builder.Push != "" {
		errs = append(errs, registry.CheckPush(ctx, registry.Options{Keychain: o.Builder.Keychain, Insecure: o.Builder.Insecure}, o.Builder.Push))
	}
	if o.Publish != nil {
		errs = append(errs, publish.CheckTargets(ctx, *o.Publish, ids))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("nothing built: %w", err)
	}
	return nil
}
