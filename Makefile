# Shorthands for the commands the README and docs give in full.

.PHONY: run test release

# The server with its embedded default: one node, data in ./data, loopback.
run:
	go run ./cmd/throttled

# The whole test suite, as CI runs it.
test:
	go test -race -timeout 30m ./...

# Static linux/amd64 and linux/arm64 binaries and SHA256SUMS in dist/.
release:
	scripts/release.sh
