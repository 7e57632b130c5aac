# korpus — two commands: `make demo` and `make test`. Both set everything up first (idempotent, fast on re-run).
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
BIN := $(VENV)/bin
DEMO ?= .demo
APT_PACKAGES := tesseract-ocr tesseract-ocr-rus tesseract-ocr-eng tesseract-ocr-osd ffmpeg ghostscript fonts-dejavu-core espeak-ng poppler-utils djvulibre-bin libreoffice-writer-nogui chromium chromium-driver openjdk-17-jdk-headless libarchive-tools
export PREFECT_SERVER_ANALYTICS_ENABLED := false
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: help setup system python models lucene demo test test-opensearch lint format clean

help:
	@echo "make demo   set up, write the sample archive, refresh it twice, run cited searches"
	@echo "make test   set up and run the unit + integration tests"
	@echo "make setup  system packages (apt), .venv with torch==2.13.0 (CPU), offline models, Lucene for the analyzer check"
	@echo "make lint   ruff check + format check"
	@echo "make test-opensearch   the OpenSearch backend suite against KORPUS_OPENSEARCH_URL (a real cluster)"

setup: system python models lucene

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

# Lucene's RussianAnalyzer for tests/integration/test_lucene_analyzer.py: the Anserini fat jar (Lucene 9.9.1)
# inside PyPI's pyserini 1.6.0 sdist — fetched from the registry, only the jar kept.
LUCENE_JAR := .cache/lucene/anserini-1.7.1-fatjar.jar
lucene: $(LUCENE_JAR)

$(LUCENE_JAR): | python
	mkdir -p .cache/lucene
	$(BIN)/python -m pip download -q --no-deps --no-binary :all: --no-build-isolation pyserini==1.6.0 -d .cache/lucene \
	  || $(BIN)/python -m pip download -q --no-deps --no-binary :all: pyserini==1.6.0 -d .cache/lucene
	tar -xzf .cache/lucene/pyserini-1.6.0.tar.gz -C .cache/lucene --no-same-owner --strip-components=4 \
	  pyserini-1.6.0/pyserini/resources/jars/anserini-1.7.1-fatjar.jar
	rm -f .cache/lucene/pyserini-1.6.0.tar.gz

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
	$(BIN)/python -m pytest -m "(unit or integration) and not slow" -q

# The whole OpenSearch backend suite — lexical, admin, kNN, hybrid, routing — against a real cluster.
test-opensearch: python
	@test -n "$$KORPUS_OPENSEARCH_URL" || { echo "set KORPUS_OPENSEARCH_URL=http://host:9200 (a real OpenSearch 2.19+ cluster)"; exit 2; }
	$(BIN)/python -m pytest -m opensearch -q tests/integration/test_opensearch_backend.py tests/integration/test_retriever_backends.py

lint:
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format:
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:
	rm -rf $(DEMO) .pytest_cache
