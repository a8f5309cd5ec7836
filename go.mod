module github.com/throttleddb/throttled

go 1.26.8

require (
	github.com/redis/go-redis/v9 v9.23.0
	github.com/tidwall/redcon v1.6.2
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/tidwall/btree v1.1.0 // indirect
	github.com/tidwall/match v1.1.1 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)
