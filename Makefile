# Two entry points for a fresh clone (see README): `make run` and `make test`.
# Each creates .venv/ (pinned by constraints.txt) on first use; later calls reuse it.
PYTHON ?= python3
VENV   := .venv
STAMP  := $(VENV)/.installed-stamp
PROFILE ?= quick

.PHONY: run test check venv clean

# The install's seconds go to .venv/.install-seconds: infra/test.sh reports them with the suite's time.
$(STAMP): pyproject.toml constraints.txt
	@started=$$(date +%s) && set -x && \
	$(PYTHON) -m venv $(VENV) && \
	$(VENV)/bin/pip install -q --upgrade pip && \
	$(VENV)/bin/pip install -q -c constraints.txt -e '.[test,minilm]' && \
	set +x && echo $$(( $$(date +%s) - started )) > $(VENV)/.install-seconds
	touch $(STAMP)

venv: $(STAMP)

run: $(STAMP)
	$(VENV)/bin/deepsent run --profile $(PROFILE)

test: $(STAMP)
	bash infra/test.sh

# The fast loop for daily work: the unit and component tests, none that starts a service or runs a chain.
check: $(STAMP)
	DEEPSENT_SUITE_REPORT=$(CURDIR)/.deepsent/check-report.json DEEPSENT_TEST_WORKERS=2 \
	bash infra/test.sh -m "not slow and not heavy and not services and not stack and not cuda"

clean:
	rm -rf $(VENV) .deepsent
