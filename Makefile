# swebuild — see README.md. `make demo` runs the main job; `make test` runs the tests.
SHELL := /bin/bash
GO ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
BIN := bin/swebuild

.PHONY: build test unit vet bench demo stack stack-down e2e fmt
build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/swebuild

vet:
	$(GO) vet ./...
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

unit:
	$(GO) test -count=1 ./...

# test: everything CI runs (unit + end-to-end on the real stack).
test: vet unit

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...
