// Package policy holds rate-limit policies: which limits apply to a request,
// found from its method, its path (or a plain name) and its tenant.
//
// A Policy matches an endpoint (an HTTP path template with its methods, a
// plain name, or one of the fallbacks Default and Unknown), optionally one
// tenant, and carries one or more tiers, each a limit of one of the native
// algorithms. A Table indexes a checked set of policies; Resolve finds, for
// a request, the endpoint it reaches (the most specific template; Unknown
// when none matches, so random paths never mint endpoints) and the
// policies that apply in the order of precedence:
//
//	(endpoint, tenant) -> (endpoint, any) -> (default, tenant) -> (default, any) -> (UNKNOWN, any)
//
// The package is pure: it reads no clock, does no I/O and keeps no state
// beyond the Table it builds. Where policies are kept (the store, through
// the one apply path) and how a decision charges the tiers is the business
// of package commands.
package policy
