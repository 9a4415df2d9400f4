// Package store owns Isle's access to MySQL (gorm) and Redis (go-redis): the
// versioned, embedded migrations and the gorm models of every table; one Redis
// client per logical database of doc/keys.md; the Lua scripts (embedded .lua files
// with a KEYS/ARGV/returns header and one typed wrapper each); locks; and the
// start-up cleanup of volatile keys. Keys are built by package store/keys.
//
// store persists what the rules decide: it imports the contract (topology),
// the rules' packages (game, order) and a few generic pieces (the group
// commit, the lease, the Lua loader), never a consumer, the API or a binary
// (e2e/imports_test.go holds the graph).
package store
