# The test command of the README: installs what the tests need, then runs every test
# with the race detector against real redis-server processes the tests start themselves.
.PHONY: test deps check test-docker

test: deps
	go test -race -count=1 ./...

deps:
	./tools/install-deps.sh

# Formatting and vet, as CI runs them before the tests.
check:
	@unformatted="$$(gofmt -l .)"; if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	go vet ./...

# The Docker backend of redlocktest against a private Docker engine that the script
# starts (installing docker.io if needed), then stops and cleans up.
test-docker: deps
	./docker/test-docker.sh
