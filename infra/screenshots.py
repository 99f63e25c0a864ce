"""PNG screenshots of the running stack: Airflow's grid of a deepsent_retrain run, its MLflow runs.

Usage (with ``deepsent stack up`` running and a successful retrain run)::

    .venv/bin/python infra/screenshots.py [--run-id RUN_ID] [--out docs/screenshots]

and, after a promotion, the registry of ``deepsent-ranker`` (list page and each version's page with
its aliases and quality tags), the trigger form of ``deepsent_retrain`` and the grid of the latest
successful ``deepsent_index`` run::

    .venv/bin/python infra/screenshots.py --promotion [--out docs/screenshots]

and, for an analysis report written by ``deepsent analyze`` (no stack needed)::

    .venv/bin/python infra/screenshots.py --report PATH/index.html [--out docs/analysis]

Each run also merges what every PNG it took shows (the DAG run and its task ids, the MLflow runs, the
registry versions; ``infra/screenshot_manifest.py``) into ``manifest.json`` beside them, then runs
``python -m docs_render``, which renders the block of that folder's README.md from it.

Headless Chromium (``infra/install-chromium.sh``) through Playwright. The Airflow UI is logged in
with a JWT from the REST API, set as the UI's ``_token`` cookie. The MLflow page is the experiment's
run list filtered on the DAG run's id (tag ``airflow.dag_run_id``): the way from a DAG run to its runs.
"""
from __future__ import annotations

import argparse
import base64
import datetime as dt
import functools
import json
import subprocess
import sys
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import stack  # noqa: E402  (infra/ is a folder of scripts, not a package)

from infra import screenshot_manifest as manifest  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"]
VIEWPORT = {"width": 1600, "height": 1000}
METRIC_COLUMNS = ("best_valid_mrr", "param_count")


def _get_json(url: str, token: str | None = None, basic: dict[str, str] | None = None, body: Any = None) -> Any:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if basic:
        pair = base64.b64encode(f"{basic['username']}:{basic['password']}".encode()).decode()
        headers = {"Authorization": f"Basic {pair}"}
    data = None if body is None else json.dumps(body).encode()
    if data is not None:
        headers["Content-Type"] = "application/json"
    with urllib.request.urlopen(urllib.request.Request(url, data=data, headers=headers), timeout=30) as resp:
        return json.loads(resp.read())


@functools.cache
def _commit() -> str:
    return manifest.git_commit(stack.PROJECT_ROOT)  # once per run: others may commit while it takes shots


def _stamp() -> dict[str, str]:
    """When, and at which commit, a screenshot is taken (the manifest fields of every entry)."""
    return {"taken_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "commit": _commit()}


def grid_facts(cfg: stack.StackConfig, token: str, dag_id: str, run_id: str) -> dict[str, Any]:
    """The manifest entry of the grid of ``run_id``: the run and its task instances, from Airflow's REST API."""
    run_url = f"{cfg.url('airflow')}/api/v2/dags/{dag_id}/dagRuns/{urllib.parse.quote(run_id, safe='')}"
    tis = _get_json(f"{run_url}/taskInstances?limit=1000", token)["task_instances"]
    return manifest.grid_entry(dag_id, _get_json(run_url, token), tis, **_stamp())


def registry_facts(cfg: stack.StackConfig, model: str) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The versions (with tags) and aliases of the registered ``model``, from MLflow's REST API."""
    api, login = f"{cfg.url('mlflow')}/api/2.0/mlflow", mlflow_login(cfg)
    query = urllib.parse.urlencode({"filter": f"name='{model}'", "max_results": 100})
    versions = _get_json(f"{api}/model-versions/search?{query}", basic=login).get("model_versions", [])
    got = _get_json(f"{api}/registered-models/get?{urllib.parse.urlencode({'name': model})}", basic=login)
    return versions, {a["alias"]: a["version"] for a in got["registered_model"].get("aliases", [])}


def latest_successful_run(cfg: stack.StackConfig, token: str, dag_id: str) -> str:
    """The id of the most recent successful run of ``dag_id``."""
    query = urllib.parse.urlencode({"state": "success", "order_by": "-run_after", "limit": 1})
    runs = _get_json(f"{cfg.url('airflow')}/api/v2/dags/{dag_id}/dagRuns?{query}", token)["dag_runs"]
    if not runs:
        raise SystemExit(f"no successful run of {dag_id} yet")
    return runs[0]["dag_run_id"]


def experiment_id(cfg: stack.StackConfig, name: str) -> str:
    """MLflow's id of the experiment ``name``."""
    query = urllib.parse.urlencode({"experiment_name": name})
    url = f"{cfg.url('mlflow')}/api/2.0/mlflow/experiments/get-by-name?{query}"
    return _get_json(url, basic=mlflow_login(cfg))["experiment"]["experiment_id"]


def mlflow_login(cfg: stack.StackConfig) -> dict[str, str]:
    """The stack MLflow server's basic-auth credentials (Playwright's ``http_credentials`` form)."""
    env = cfg.client_env()
    return {"username": env["MLFLOW_TRACKING_USERNAME"], "password": env["MLFLOW_TRACKING_PASSWORD"]}


def take(cfg: stack.StackConfig, dag_id: str, run_id: str | None, experiment: str,
         out: Path) -> dict[Path, dict[str, Any]]:
    """Screenshot the Airflow grid of the run and its MLflow training runs; returns each PNG's manifest entry."""
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import sync_playwright

    token = stack.airflow_token(cfg)
    run_id = run_id or latest_successful_run(cfg, token, dag_id)
    of_this_run = urllib.parse.quote(f"tags.`airflow.dag_run_id` = '{run_id}'", safe="")
    grid_png, mlflow_png = out / f"airflow-grid-{dag_id}.png", out / f"mlflow-experiment-{experiment}.png"
    out.mkdir(parents=True, exist_ok=True)
    shots = {grid_png: grid_facts(cfg, token, dag_id, run_id)}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        try:
            context = browser.new_context(viewport=VIEWPORT, http_credentials=mlflow_login(cfg))
            context.add_cookies([{"name": "_token", "value": token, "url": cfg.url("airflow")}])
            page = context.new_page()
            page.goto(f"{cfg.url('airflow')}/dags/{dag_id}/runs/{urllib.parse.quote(run_id, safe='')}", timeout=60_000)
            page.wait_for_selector("text=promote", timeout=60_000)
            page.wait_for_timeout(2_000)  # let icons and durations settle
            page.screenshot(path=str(grid_png))
            exp = experiment_id(cfg, experiment)
            runs = _get_json(f"{cfg.url('mlflow')}/api/2.0/mlflow/runs/search", basic=mlflow_login(cfg), body={
                "experiment_ids": [exp], "filter": f"tags.`airflow.dag_run_id` = '{run_id}'", "max_results": 1000})
            page.goto(f"{cfg.url('mlflow')}/#/experiments/{exp}/runs?searchFilter={of_this_run}", timeout=60_000)
            page.wait_for_selector("text=matching runs", timeout=60_000)
            try:  # cosmetic: hide the assistant panel, show the validation metric and model size
                page.locator("[aria-label='Close']").first.click(timeout=3_000)
                page.get_by_role("button", name="Columns", exact=True).click()
                for column in METRIC_COLUMNS:  # the search leaves one collapsed group ("Metrics (1)"): check it
                    page.get_by_placeholder("Search columns").fill(column)
                    page.wait_for_timeout(1_000)  # the tree re-renders for the new search
                    page.locator("[data-testid=column-selector-tree] span[title]").first.click(timeout=5_000)
            except PlaywrightError as exc:
                print(f"MLflow page: default columns only ({exc.message.splitlines()[0]})", file=sys.stderr)
            page.keyboard.press("Escape")  # never leave the column menu over the runs
            page.wait_for_timeout(2_000)
            page.screenshot(path=str(mlflow_png))
            shots[mlflow_png] = manifest.experiment_entry(experiment, run_id, runs.get("runs", []), METRIC_COLUMNS,
                                                          **_stamp())
        finally:
            browser.close()
    return shots


REGISTERED_MODEL = "deepsent-ranker"
#: MLflow's tables scroll inside 280 px: show every row (a version's tags) in the shot.
UNCLIPPED_TABLES = ".du-bois-light-table-body { max-height: none !important; overflow: visible !important; }"


def _mlflow_settle(page: Any) -> None:
    """Close MLflow's assistant panel (it takes a third of the width) and unclip its tables."""
    from playwright.sync_api import Error as PlaywrightError

    try:
        page.locator("[aria-label='Close']").first.click(timeout=3_000)
    except PlaywrightError:
        pass
    page.add_style_tag(content=UNCLIPPED_TABLES)
    page.wait_for_timeout(2_000)


def _airflow_page(pw: Any, cfg: stack.StackConfig, token: str, height: int = VIEWPORT["height"]) -> Any:
    """A page logged in to the Airflow UI (the JWT as its ``_token`` cookie)."""
    browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
    context = browser.new_context(viewport={**VIEWPORT, "height": height}, http_credentials=mlflow_login(cfg))
    context.add_cookies([{"name": "_token", "value": token, "url": cfg.url("airflow")}])
    return browser, context.new_page()


def take_promotion(cfg: stack.StackConfig, out: Path, retrain: str = "deepsent_retrain",
                   index: str = "deepsent_index") -> dict[Path, dict[str, Any]]:
    """The registry of deepsent-ranker (list + one page per version), the retrain trigger form, the index run's grid.

    Returns each PNG's manifest entry; version pages of versions the registry no longer has are removed."""
    from playwright.sync_api import sync_playwright

    token = stack.airflow_token(cfg)
    out.mkdir(parents=True, exist_ok=True)
    mlflow, (found, aliases) = cfg.url("mlflow"), registry_facts(cfg, REGISTERED_MODEL)
    versions = sorted(int(v["version"]) for v in found)
    for stale in set(out.glob(f"mlflow-registry-{REGISTERED_MODEL}-v*.png")) - {
            out / f"mlflow-registry-{REGISTERED_MODEL}-v{n}.png" for n in versions}:
        stale.unlink()
    shots: dict[Path, dict[str, Any]] = {}
    with sync_playwright() as pw:
        browser, page = _airflow_page(pw, cfg, token, height=1200)
        try:
            page.goto(f"{mlflow}/#/models/{REGISTERED_MODEL}", timeout=60_000)
            page.wait_for_selector("text=Version 1", timeout=60_000)
            _mlflow_settle(page)
            path = out / f"mlflow-registry-{REGISTERED_MODEL}.png"
            page.screenshot(path=str(path))
            shots[path] = manifest.registry_entry(REGISTERED_MODEL, found, aliases, **_stamp())
            for number in versions:  # the tags (quality figures, decision, reason) are on each version's page
                page.goto(f"{mlflow}/#/models/{REGISTERED_MODEL}/versions/{number}", timeout=60_000)
                page.wait_for_selector("text=deepsent.decision", timeout=60_000)
                _mlflow_settle(page)
                path = out / f"mlflow-registry-{REGISTERED_MODEL}-v{number}.png"
                page.screenshot(path=str(path), full_page=True)
                shots[path] = manifest.registry_entry(REGISTERED_MODEL, found, aliases, version=number, **_stamp())
        finally:
            browser.close()
        browser, page = _airflow_page(pw, cfg, token, height=3600)  # tall enough for every param of the form
        try:
            page.goto(f"{cfg.url('airflow')}/dags/{retrain}", timeout=60_000)
            page.locator("button:visible", has_text="Trigger").first.click(timeout=60_000)
            page.wait_for_selector("text=Run Parameters", timeout=60_000)
            page.wait_for_timeout(2_000)
            path = out / f"airflow-trigger-form-{retrain}.png"
            submit = page.locator("button:visible", has_text="Trigger").last.bounding_box()  # the form's own button
            page.screenshot(path=str(path), clip={"x": 0, "y": 0, "width": VIEWPORT["width"],
                                                  "height": submit["y"] + submit["height"] + 40})
            params = _get_json(f"{cfg.url('airflow')}/api/v2/dags/{retrain}/details", token).get("params") or {}
            shots[path] = manifest.form_entry(retrain, params, **_stamp())
        finally:
            browser.close()
        browser, page = _airflow_page(pw, cfg, token)
        try:
            run_id = latest_successful_run(cfg, token, index)
            page.goto(f"{cfg.url('airflow')}/dags/{index}/runs/{urllib.parse.quote(run_id, safe='')}", timeout=60_000)
            page.wait_for_selector("text=build_index", timeout=60_000)
            page.wait_for_timeout(2_000)
            path = out / f"airflow-grid-{index}.png"
            page.screenshot(path=str(path))
            shots[path] = grid_facts(cfg, token, index, run_id)
        finally:
            browser.close()
    return shots


#: (file name, heading the shot starts at, heading it stops before) of an analysis report
REPORT_SHOTS = (("report-example1.png", "h1", "h3 >> nth=1"),
                ("report-topics-cost.png", "h2 >> nth=1", "h2 >> nth=3"))


def take_report(report: Path, out: Path) -> list[Path]:
    """Screenshot the first example and the topic/cost sections of an analysis report."""
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    paths = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport=VIEWPORT)
            page.goto(report.resolve().as_uri())
            page.wait_for_load_state("load")
            for name, start, stop in REPORT_SHOTS:
                top = page.locator(start).bounding_box()["y"] - 8
                bottom = page.locator(stop).bounding_box()["y"] - 8
                width = page.evaluate("document.documentElement.scrollWidth")
                page.screenshot(path=str(out / name), full_page=True,
                                clip={"x": 0, "y": top, "width": width, "height": bottom - top})
                paths.append(out / name)
        finally:
            browser.close()
    return paths


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dag-id", default="deepsent_retrain")
    parser.add_argument("--run-id", help="default: the latest successful run")
    parser.add_argument("--experiment", default="deepsent", help="MLflow experiment to show")
    parser.add_argument("--out", type=Path, help="default: docs/screenshots, or docs/analysis with --report")
    parser.add_argument("--report", type=Path, help="an analysis report's index.html to screenshot instead")
    parser.add_argument("--promotion", action="store_true",
                        help="the deepsent-ranker registry, the retrain trigger form and the deepsent_index grid instead")
    args = parser.parse_args(argv)
    if args.report:
        for path in take_report(args.report, args.out or stack.PROJECT_ROOT / "docs" / "analysis"):
            print(path)
        return 0
    args.out = args.out or stack.PROJECT_ROOT / "docs" / "screenshots"
    cfg = stack.StackConfig.from_env()
    shots = (take_promotion(cfg, args.out) if args.promotion
             else take(cfg, args.dag_id, args.run_id, args.experiment, args.out))
    for path in shots:
        print(path)
    print(manifest.record(args.out, {path.name: entry for path, entry in shots.items()}))
    # the README block's one writer renders it from the manifest (a command, not an import: docs_render sits above)
    return subprocess.run([sys.executable, "-m", "docs_render"], cwd=stack.PROJECT_ROOT, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
