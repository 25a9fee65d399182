// Package access is runnel's security surface, shared by both front doors:
// the ACLs and the one authorizer built from them (Allowed; the decision
// itself is package server/auth's), the users and their SCRAM credentials
// (UpsertUser, CheckPassword, the bootstrap superuser), API tokens
// (CreateToken, CheckToken), the UI sessions of this node (OpenSession,
// CheckSession), the HTTP credential check (CheckCredentials) and the HTTP
// audit log (WithAudit).
//
// Users, tokens and ACLs live in the metadata log; the package reaches it
// only through Metadata (the image, propose a command, catch up with the
// active controller), and takes the node's wall clock (Config.Now) and
// logger. Package server builds one Access per node and adapts it to each
// door (server/accessbackend.go: the api and kafkaproto interfaces and the
// translation of this package's sentinels, ErrInvalidCredential,
// ErrUnknownMechanism, ErrBadToken and auth.ErrInvalidACL, in each door's
// table). Its logic is tested in-process (acls_test.go,
// passwordcache_test.go); the process tests are in package server.
//
// Goroutines: none. Every method runs on its caller's goroutine.
//
// Lock order: the password cache's mu and the session store's mu are
// leaves, held only around their maps (never across a key derivation, a
// proposal or I/O); the authorizer cache is an atomic pointer.
package access
