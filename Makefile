# korpus — two commands: `make demo` and `make test`. Both set everything up first (idempotent, fast on re-run).
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
BIN := $(VENV)/bin
DEMO ?= .demo
APT_PACKAGES := tesseract-ocr tesseract-ocr-rus tesseract-ocr-eng tesseract-ocr-osd ffmpeg ghostscript fonts-dejavu-core fonts-liberation2 espeak-ng poppler-utils djvulibre-bin libreoffice-writer-nogui chromium chromium-driver openjdk-17-jdk-headless maven libarchive-tools postgresql
export PREFECT_SERVER_ANALYTICS_ENABLED := false
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: help setup system python models opensearch verapdf demo test test-topology test-opensearch lint format clean

help:
	@echo "make demo   set up, write the sample archive, refresh it twice, run cited searches"
	@echo "make test   set up and run the unit + integration tests"
	@echo "make setup  system packages (apt), .venv with torch==2.13.0, offline models, the OpenSearch node (Maven)"
	@echo "make lint   ruff check + format check"
	@echo "make test-opensearch   the OpenSearch tests against KORPUS_OPENSEARCH_URL (a user's own cluster)"

setup: system python models opensearch verapdf

system:
	@missing=$$(for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing system packages:" $$missing; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi

python: $(VENV)/.installed

# torch is pinned to the CPU wheel on disk in the same install command as everything that depends on it.
$(VENV)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q "torch==2.13.0" -e ".[dev]"
	touch $@

models: python
	$(BIN)/korpus models

# A real OpenSearch node for `korpus opensearch start` and the tests: OpenSearch 2.19.1 and its k-NN plugin from Maven
# Central, assembled by infra/opensearch/node (Lucene's jars there serve the analyzer check too). Rebuilt only when
# the project changes.
NODE := infra/opensearch/node
opensearch: $(NODE)/target/.built

$(NODE)/target/.built: $(NODE)/pom.xml $(wildcard $(NODE)/src/main/java/org/korpus/opensearch/*.java)
	cd $(NODE) && mvn -q -B package
	touch $@

# veraPDF, the PDF/A validator, from Maven Central (infra/verapdf): the tests check every searchable copy with it.
VERAPDF := infra/verapdf
verapdf: $(VERAPDF)/target/.built

$(VERAPDF)/target/.built: $(VERAPDF)/pom.xml
	cd $(VERAPDF) && mvn -q -B package
	touch $@

demo: setup
	$(BIN)/korpus sample $(DEMO)/archive
	$(BIN)/korpus refresh --root $(DEMO)/archive --data $(DEMO)/data
	@echo; echo "== second refresh: nothing changed, so no OCR, ASR or embedding"
	$(BIN)/korpus refresh --root $(DEMO)/archive --data $(DEMO)/data
	@echo; echo "== catalog"; $(BIN)/korpus sources --data $(DEMO)/data
	@echo; echo "== quarantine"; $(BIN)/korpus quarantine --data $(DEMO)/data
	@echo; echo "== about the collection: the register of persons, built by code per access scope"
	$(BIN)/korpus meta persons --data $(DEMO)/data
	@echo; echo "== status"; $(BIN)/korpus status --data $(DEMO)/data
	@echo; echo "== every refresh is in the Prefect UI (korpus's local server, reused by each refresh)"; $(BIN)/korpus prefect; echo "(it stays up for the UI; \`korpus prefect stop\` stops it)"
	@echo; echo "== search: answered from a 300-dpi scan (Tesseract)"
	$(BIN)/korpus search "когда отремонтируют крышу склада" --data $(DEMO)/data -k 2
	@echo; echo "== search: a scan whose old text layer was garbage («AkT npoBepkn»), OCR'd again"
	$(BIN)/korpus search "огнетушители с истёкшим сроком поверки" --data $(DEMO)/data -k 2
	@echo; echo "== search: contract number"
	$(BIN)/korpus search "45-17/2023" --data $(DEMO)/data -k 2
	@echo; echo "== search: the HR order, default scopes (public) — invisible"
	$(BIN)/korpus search "премия Смирновой" --data $(DEMO)/data -k 2
	@echo; echo "== search: the same with scope hr"
	$(BIN)/korpus search "премия Смирновой" --scopes public,hr --data $(DEMO)/data -k 1
	@echo; echo "== chunks of the contract (structure-v2: headings, table, procedure)"
	$(BIN)/korpus chunks договоры/договор_поставки_45-17.pdf --data $(DEMO)/data
	@echo; echo "== searchable copies of the OCR'd scans (pdftotext reads them back)"
	@ls $(DEMO)/data/searchable/сканы/ && pdftotext "$(DEMO)/data/searchable/сканы/протокол_1998.pdf" - | head -5
	@echo; echo "== transcript of the espeak-ng recording (robotic voice: Whisper base hears it poorly)"
	@cat "$(DEMO)/data/transcripts/записи/совещание_2023-05-15.wav.txt"

test: setup
	$(BIN)/python -m pytest -m "(unit or integration) and not slow" -q --durations=15

# The production topology as processes (PostgreSQL, Prefect server and worker, Dask, 3 OpenSearch nodes, korpus
# serve), one part SIGKILLed at a time (tests/topology; docs/topology.md). CI runs it after `make test`.
test-topology: setup
	$(BIN)/python -m pytest -m topology tests/topology -q -s --durations=5

# The OpenSearch tests against a user's own cluster instead of the node `make test` starts.
test-opensearch: python
	@test -n "$$KORPUS_OPENSEARCH_URL" || { echo "set KORPUS_OPENSEARCH_URL=http://host:9200 (a real OpenSearch 2.19+ cluster)"; exit 2; }
	$(BIN)/python -m pytest -m opensearch -q

lint: python
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format:
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:
	rm -rf $(DEMO) .pytest_cache
