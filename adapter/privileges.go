package adapter

import (
	"fmt"
	"slices"
	"strings"

	"github.com/shardtail/shardtail/catalog"
	"github.com/shardtail/shardtail/sql"
)

// Privileges, as PostgreSQL (15) and Materialize check them:
//
//   - A superuser may do anything, read through any view too.
//   - Objects: the owner may do anything to its object; another role needs
//     the privilege granted to it or to PUBLIC. Reading a view or a
//     materialized view also needs its owner to be able to read what it
//     reads, so revoking a table's SELECT from a view's owner closes the
//     view too. UPDATE and DELETE read what they change: SELECT too (as
//     Materialize). Only the owner (or a superuser) drops, alters and
//     grants.
//   - Roles: CREATE, ALTER and DROP ROLE need the CREATEROLE attribute;
//     giving or taking SUPERUSER, and touching a superuser role, need
//     superuser; the default role stays a superuser. Without CREATEROLE
//     a role may change its own password and nothing else. A role that
//     owns items or holds grants is not dropped.
//   - ALTER SYSTEM needs superuser.
//   - pg_cancel_backend cancels sessions of the caller's own role; a
//     superuser's only a superuser may cancel. A CancelRequest is not a
//     statement: its secret key is its authority (pgwire).
//
// Every check reads the catalog state the statement acts on: the role
// checks run inside the catalog update that applies the change, so a
// concurrent ALTER ROLE cannot slip between the check and the write.

// isSuperuser reports whether name is a superuser in cs.
func isSuperuser(cs *catalog.State, name string) bool {
	r := cs.Roles[name]
	return r != nil && r.Superuser
}

// requireSuperuser fails unless the session's role is a superuser.
func (s *Session) requireSuperuser(what string) error {
	if isSuperuser(s.c.catalog.State(), s.user) {
		return nil
	}
	return errorf(codeInsufficientPriv, "permission denied: %s requires superuser", what)
}

// checkOwner fails unless the session's role owns it or is a superuser.
func (s *Session) checkOwner(it *catalog.Item) error {
	if it.Owner == s.user || isSuperuser(s.c.catalog.State(), s.user) {
		return nil
	}
	return errorf(codeInsufficientPriv, "must be owner of %s %s", strings.ToUpper(string(it.Kind)), qualified(it.Name))
}

// checkPrivilege checks that the session's role may do priv ("SELECT",
// "INSERT", ...) on it; for SELECT, also that the owners of the views it
// reads through may read what those read.
func (s *Session) checkPrivilege(it *catalog.Item, priv string) error {
	cs := s.c.catalog.State()
	if isSuperuser(cs, s.user) {
		// Owners' privileges included, as Materialize (PostgreSQL would
		// still check a view's reads as its owner).
		return nil
	}
	if !hasPrivilege(cs, s.user, it, priv) {
		return errPermissionDenied(it)
	}
	if priv == "SELECT" {
		return checkOwnerReads(cs, it, map[uint64]bool{})
	}
	return nil
}

// hasPrivilege reports whether role may do priv on it in cs.
func hasPrivilege(cs *catalog.State, role string, it *catalog.Item, priv string) bool {
	return it.Owner == role || isSuperuser(cs, role) ||
		slices.Contains(it.Grants[role], priv) || slices.Contains(it.Grants["public"], priv)
}

// checkOwnerReads checks, for a view or materialized view, that its owner
// may read each item its definition reads, recursively: a view reads with
// its owner's privileges (PostgreSQL's rule, which Materialize applies to
// materialized views too). seen guards against revisiting shared inputs.
func checkOwnerReads(cs *catalog.State, it *catalog.Item, seen map[uint64]bool) error {
	if it.Kind != catalog.KindView && it.Kind != catalog.KindMaterializedView {
		return nil
	}
	for _, id := range it.DependsOn {
		if seen[id] {
			continue
		}
		seen[id] = true
		dep := cs.ItemByID(id)
		if dep == nil {
			continue // dropped: reading it fails on its own
		}
		if !hasPrivilege(cs, it.Owner, dep, "SELECT") {
			return errPermissionDenied(dep)
		}
		if err := checkOwnerReads(cs, dep, seen); err != nil {
			return err
		}
	}
	return nil
}

func errPermissionDenied(it *catalog.Item) *Error {
	return errorf(codeInsufficientPriv, "permission denied for %s %s", strings.ToUpper(string(it.Kind)), qualified(it.Name))
}

// errRolePrivilege is PostgreSQL's refusal of a role change: "permission
// denied to <action>" with the rule in the detail.
func errRolePrivilege(action, detail string) *Error {
	return &Error{Code: codeInsufficientPriv, Message: "permission denied to " + action, detail: detail}
}

// touchesSuperuser reports whether role options give or take SUPERUSER.
func touchesSuperuser(opts []sql.Option) bool {
	return slices.ContainsFunc(opts, func(o sql.Option) bool { return o.Name == "SUPERUSER" || o.Name == "NOSUPERUSER" })
}

// onlyPassword reports whether role options change only the password.
func onlyPassword(opts []sql.Option) bool {
	return !slices.ContainsFunc(opts, func(o sql.Option) bool { return o.Name != "PASSWORD" })
}

// checkCreateRole checks that actor may create a role with opts.
func checkCreateRole(cs *catalog.State, actor string, opts []sql.Option) error {
	a := cs.Roles[actor]
	switch {
	case a != nil && a.Superuser:
		return nil
	case touchesSuperuser(opts):
		return errRolePrivilege("create role", "Only roles with the SUPERUSER attribute may create roles with the SUPERUSER attribute.")
	case a == nil || !a.CreateRole:
		return errRolePrivilege("create role", "Only roles with the CREATEROLE attribute may create roles.")
	}
	return nil
}

// checkAlterRole checks that actor may apply opts to target.
func checkAlterRole(cs *catalog.State, actor string, target *catalog.Role, opts []sql.Option) error {
	a := cs.Roles[actor]
	switch {
	case target.Name == defaultRole && slices.ContainsFunc(opts, func(o sql.Option) bool { return o.Name == "NOSUPERUSER" }):
		// As PostgreSQL's bootstrap superuser: the server starts with no
		// other, and a catalog left without one cannot be mended by SQL.
		return errRolePrivilege("alter role", "The bootstrap user must have the SUPERUSER attribute.")
	case a != nil && a.Superuser:
		return nil
	case touchesSuperuser(opts):
		return errRolePrivilege("alter role", "Only roles with the SUPERUSER attribute may change the SUPERUSER attribute.")
	case target.Superuser:
		return errRolePrivilege("alter role", "Only roles with the SUPERUSER attribute may alter roles with the SUPERUSER attribute.")
	case a != nil && a.CreateRole:
		return nil
	case target.Name == actor && onlyPassword(opts):
		// The one change a role may make without privileges.
		return nil
	case target.Name == actor:
		return errRolePrivilege("alter role", "Without the CREATEROLE attribute a role may change only its own password.")
	}
	return errRolePrivilege("alter role", "Only roles with the CREATEROLE attribute may alter other roles.")
}

// checkDropRole checks that actor may drop target.
func checkDropRole(cs *catalog.State, actor string, target *catalog.Role) error {
	a := cs.Roles[actor]
	switch {
	case a != nil && a.Superuser:
		return nil
	case a == nil || !a.CreateRole:
		return errRolePrivilege("drop role", "Only roles with the CREATEROLE attribute may drop roles.")
	case target != nil && target.Superuser:
		return errRolePrivilege("drop role", "Only roles with the SUPERUSER attribute may drop roles with the SUPERUSER attribute.")
	}
	return nil
}

// checkRoleUnused refuses to drop a role that owns items or holds grants,
// as PostgreSQL does: objects and grants name their role, so a role created
// later under the same name would inherit them.
func checkRoleUnused(cs *catalog.State, name string) error {
	for _, it := range cs.SortedItems() {
		if it.Owner == name || len(it.Grants[name]) > 0 {
			what := "privileges for"
			if it.Owner == name {
				what = "owner of"
			}
			return &Error{Code: codeDependentObjects, Message: fmt.Sprintf("role %q cannot be dropped because some objects depend on it", name),
				detail: fmt.Sprintf("%s %s %s", what, it.Kind, qualified(it.Name))}
		}
	}
	return nil
}

// cancelBackend is pg_cancel_backend(pid): it cancels the statement of
// this process's session pid if the session's role may (PostgreSQL's
// rule: the same role, or a superuser; a superuser's session only a
// superuser). It reports false for a pid that is no session here.
func (s *Session) cancelBackend(pid uint32) (bool, error) {
	s.c.mu.Lock()
	target := s.c.sessions[pid]
	s.c.mu.Unlock()
	if target == nil {
		return false, nil
	}
	cs := s.c.catalog.State()
	switch {
	case isSuperuser(cs, s.user):
	case isSuperuser(cs, target.user):
		return false, errorf(codeInsufficientPriv, "must be a superuser to cancel superuser query")
	case target.user != s.user:
		return false, errorf(codeInsufficientPriv, "must be a member of the role whose process is being canceled or member of pg_signal_backend")
	}
	return s.c.cancelBackend(pid), nil
}
