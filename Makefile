# The test command of the README: installs what the tests need, then runs every test
# with the race detector against real redis-server processes the tests start themselves.
.PHONY: test deps check

test: deps
	go test -race -count=1 ./...

deps:
	./tools/install-deps.sh

# Formatting and vet, as CI runs them before the tests.
check:
	@unformatted="$$(gofmt -l .)"; if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	go vet ./...
