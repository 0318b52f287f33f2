# Entry points for people and CI. The logic lives in scripts/; this file only names it.
SHELL := /bin/bash

.PHONY: sandbox sandbox-down test env env-down crds

## Local multi-cluster sandbox: the real environment + central + agents + an example Kafka.
sandbox:
	scripts/sandbox.sh up

## Stops the sandbox and the environment (logs are kept).
sandbox-down:
	scripts/sandbox.sh down

## Everything CI checks: environment, formatting, clippy, unit and end-to-end tests, charts.
test:
	scripts/test.sh

## Only the real test environment (two Kubernetes clusters, Kafka, Connect).
env:
	tests/env/up.sh

env-down:
	tests/env/down.sh

## Regenerates the CRD YAML in charts/kstretch-crds from the Rust types.
crds:
	cargo run -q -p kstretch-api --bin crdgen
