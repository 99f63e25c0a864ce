"""The DAG files parse cleanly and lightly, and declare the schedules, params and routing they promise."""
from __future__ import annotations

import copy
import os
import subprocess
import sys
import textwrap
from typing import Any

import pytest

from pipeline.core.config import PROJECT_ROOT

HEAVY_MODULES = ("torch", "mlflow", "dask", "distributed", "pyarrow", "gensim", "sklearn", "pandas")
#: The project's modules a DAG file may load: the torch-free catalogs (and their packages' empty __init__).
LIGHT_PROJECT_MODULES = ("encoders", "encoders.towers", "encoders.towers.tower_catalog", "eval", "eval.baseline_catalog",
                         # the stages' result types, which the chain's stage functions are annotated with
                         "encoders.search", "encoders.search.results", "encoders.training", "encoders.training.results",
                         "eval.results")


def test_every_dag_imports_without_errors(dagbag: Any) -> None:
    assert dagbag.import_errors == {}
    assert set(dagbag.dag_ids) == {"deepsent_ingest", "deepsent_retrain", "deepsent_index"}
    for dag in dagbag.dags.values():
        assert dag.doc_md and "deepsent" in dag.tags
        for task in dag.tasks:  # a mapped task keeps its docstring on the callable only
            assert task.doc_md or getattr(task, "python_callable", None).__doc__, task.task_id


def test_parsing_imports_nothing_heavy(airflow_db: Any) -> None:
    """Parse in a fresh interpreter and list the heavy modules it loaded (must be none)."""
    code = textwrap.dedent(f"""
        import sys
        from airflow.dag_processing.dagbag import BundleDagBag
        bag = BundleDagBag(dag_folder={str(PROJECT_ROOT / 'dags')!r}, bundle_path={str(PROJECT_ROOT / 'dags')!r}, bundle_name="b")
        assert len(bag.dags) == 3, bag.import_errors
        heavy = [m for m in {HEAVY_MODULES!r} if m in sys.modules]
        heavy += sorted(m for m in sys.modules if m.split(".")[0] in ("encoders", "eval") and m not in {LIGHT_PROJECT_MODULES!r})
        print("HEAVY=" + ",".join(heavy))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=os.environ.copy(), check=True)
    heavy = [line for line in out.stdout.splitlines() if line.startswith("HEAVY=")]
    assert heavy == ["HEAVY="], out.stdout[-2000:]


def test_ingest_is_daily_and_emits_the_click_asset(dagbag: Any) -> None:
    dag = dagbag.get_dag("deepsent_ingest")
    assert dag.timetable.expression == "0 0 * * *"
    # both through aliases: a day without click files emits no click event, one without catalogue files no catalogue
    assert [a.name for a in dag.get_task("ingest").outlets] == ["deepsent_clicks_days", "deepsent_catalog_days"]
    assert [a.name for a in dag.get_task("announce_new_days").outlets] == ["deepsent_new_clicks"]
    sensor = dag.get_task("wait_for_landing")
    assert sensor.mode == "reschedule"  # waiting never holds a worker slot


def test_retrain_runs_weekly_or_on_n_new_days_not_on_every_ingest(dagbag: Any) -> None:
    dag = dagbag.get_dag("deepsent_retrain")
    assert dag.timetable.asset_condition.name == "deepsent_new_clicks"  # not deepsent_clicks: that is daily
    assert dag.timetable.timetable.expression == "0 3 * * 1"
    assert [a.name for a in dag.get_task("publish").outlets] == ["deepsent_report"]
    assert [a.name for a in dag.get_task("promote").outlets] == ["deepsent_champion_promotions"]  # the champion's alias


def test_the_retrain_indexes_its_champion_and_the_index_dag_follows_the_catalogue(dagbag: Any) -> None:
    retrain = dagbag.get_dag("deepsent_retrain")
    assert [a.name for a in retrain.get_task("index").outlets] == ["deepsent_index"]
    assert retrain.get_task("index").upstream_task_ids == {"promote"}
    assert "embed" not in retrain.task_ids  # no stage embeds a tower nothing reads
    dag = dagbag.get_dag("deepsent_index")
    assert dag.timetable.asset_condition.name == "deepsent_catalog"  # a day's catalogue refreshes it (or by hand)
    assert [a.name for a in dag.get_task("build_index").outlets] == ["deepsent_index"]
    # its stages are the index chain's, through the retrain's stage wrapper: each documented by its declaration
    from deepsent.chain import INDEX_CHAIN

    for declared in INDEX_CHAIN:
        assert dag.get_task(declared.name).doc_md == declared.doc
    assert dag.get_task("encode").upstream_task_ids == {"champion", "corpus_shards"} and dag.get_task("encode").queue
    assert dag.get_task("build_index").upstream_task_ids == {"champion", "encode"}


@pytest.mark.parametrize(("cron", "every", "expected"), [
    ("0 3 * * 1", "7", "AssetOrTimeSchedule"), ("", "7", "Asset"), ("0 3 * * 1", "0", "CronTriggerTimetable"),
    ("", "0", "NoneType"), ("0 3 * * 1", "seven", "DEEPSENT_RETRAIN_EVERY_DAYS: 'seven' is not a non-negative integer"),
    ("0 3 * *", "7", "DEEPSENT_RETRAIN_CRON: '0 3 * *' is not a cron expression (five fields, e.g. '0 3 * * 1') nor empty"),
])
def test_retrain_schedule_follows_the_settings(airflow_db: Any, cron: str, every: str, expected: str) -> None:
    """Parsed in a fresh interpreter with the settings; a bad value is one line naming the variable."""
    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(PROJECT_ROOT / 'dags')!r})
        try:
            from _assets import retrain_schedule
            print("SCHEDULE=" + type(retrain_schedule()).__name__)
        except Exception as exc:
            print("SCHEDULE=" + str(exc))
    """)
    env = {**os.environ, "DEEPSENT_RETRAIN_CRON": cron, "DEEPSENT_RETRAIN_EVERY_DAYS": every}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert f"SCHEDULE={expected}" in out.stdout.splitlines(), out.stdout[-2000:] + out.stderr[-2000:]


@pytest.mark.parametrize(("name", "value", "expected"), [
    ("DEEPSENT_TASK_RETRIES", "three", "DEEPSENT_TASK_RETRIES: 'three' is not a non-negative integer"),
    ("DEEPSENT_RETRY_DELAY_S", "-1", "DEEPSENT_RETRY_DELAY_S: '-1' is not a retry delay in seconds above 0 and at most 86,400"),
    ("DEEPSENT_START_DATE", "2026-13-01", "DEEPSENT_START_DATE: '2026-13-01' is not a date YYYY-MM-DD"),
    ("DEEPSENT_TRAIN_QUEUE", " ", "DEEPSENT_TRAIN_QUEUE: '' is not a queue name (1-250 printable characters)"),
])
def test_a_bad_setting_of_the_dag_files_is_one_line_naming_it(airflow_db: Any, name: str, value: str, expected: str) -> None:
    """Every environment variable the DAG files read is checked where it is read: one line, not a traceback."""
    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(PROJECT_ROOT / 'dags')!r})
        try:
            import _params
            print("PARSED")
        except Exception as exc:
            print("ERROR=" + str(exc))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, name: value},
                         check=True)
    assert f"ERROR={expected}" in out.stdout.splitlines(), out.stdout[-2000:] + out.stderr[-2000:]


def test_new_days_count_distinct_days_after_the_last_retrain(monkeypatch: pytest.MonkeyPatch) -> None:
    from datetime import datetime, timezone

    monkeypatch.syspath_prepend(str(PROJECT_ROOT / "dags"))  # as the DAG processor imports it (not a package)
    from _assets import new_days

    at = [datetime(2026, 1, d, tzinfo=timezone.utc) for d in range(1, 6)]
    events = [(at[0], "2026-01-01"), (at[1], "2026-01-02"), (at[2], "2026-01-02"), (at[3], "2025-12-30"), (at[4], None)]
    assert new_days(events, None) == ["2025-12-30", "2026-01-01", "2026-01-02"]  # a re-ingested day counts once
    assert new_days(events, at[1]) == ["2025-12-30", "2026-01-02"]  # a backfilled old day is new clicks too
    assert new_days(events, at[4]) == []


def test_a_catalogue_event_names_the_days_whose_files_landed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(PROJECT_ROOT / "dags"))
    from _assets import catalog_event

    landed = {"2026-01-02": {"kind": "delta", "launches": 2, "edits": 1, "retirements": 1},
              "2026-01-03": {"kind": "carried", "launches": 0, "edits": 0, "retirements": 0}}
    assert catalog_event({"catalog": landed}) == {"days": ["2026-01-02"], "launches": 2, "edits": 1, "retirements": 1}
    assert catalog_event({"catalog": {"2026-01-03": landed["2026-01-03"]}}) is None  # carried forward: no event
    assert catalog_event({"catalog": {}}) is None


def test_training_is_mapped_and_routable(airflow_db: Any) -> None:
    """Parsed with a GPU queue and pool configured, the mapped training task is routed to them."""
    code = textwrap.dedent(f"""
        from airflow.dag_processing.dagbag import BundleDagBag
        from airflow.sdk.definitions.mappedoperator import MappedOperator
        bag = BundleDagBag(dag_folder={str(PROJECT_ROOT / 'dags')!r}, bundle_path={str(PROJECT_ROOT / 'dags')!r}, bundle_name="b")
        train = bag.dags["deepsent_retrain"].get_task("train")
        print(f"ROUTE={{isinstance(train, MappedOperator)}},{{train.queue}},{{train.pool}}")
    """)
    env = {**os.environ, "DEEPSENT_TRAIN_QUEUE": "gpu", "DEEPSENT_TRAIN_POOL": "gpu_pool"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert "ROUTE=True,gpu,gpu_pool" in out.stdout.splitlines(), out.stdout[-2000:]


def test_tasks_retry_with_backoff_except_on_bad_input(dagbag: Any) -> None:
    for dag in dagbag.dags.values():
        for task in dag.tasks:
            if task.task_id == "check_params":
                assert task.retries == 0
                continue
            assert task.retries >= 1 and task.retry_exponential_backoff > 0, task.task_id
            decision = task.retry_policy.evaluate(_input_error(), 1, task.retries + 1)
            assert decision.action.value == "fail"
            assert task.retry_policy.evaluate(OSError("S3 timeout"), 1, task.retries + 1).action.value == "default"


def _input_error() -> Exception:
    from pipeline.core.errors import InputError

    return InputError("landing/clicks/dt=2026-01-01/part-0.jsonl", "bad row", row=3)


def _retrain_params(dagbag: Any) -> Any:
    """A private copy of the retrain DAG's ParamsDict (updating it must not touch the DAG's)."""
    return copy.deepcopy(dagbag.get_dag("deepsent_retrain").params)


def test_retrain_params_have_defaults_and_validate(dagbag: Any) -> None:
    defaults = _retrain_params(dagbag).validate()
    assert defaults["profile"] == "quick" and defaults["models"] is None and defaults["negatives"] is None
    assert defaults["simulate_days"] == 0 and defaults["stale_after_refusals"] >= 1
    good = _retrain_params(dagbag)
    good.update({"models": ["lstm"], "ncell": [8], "epochs": 1, "start_date": "2026-01-01", "baselines": ["bm25"]})
    assert good.validate()["models"] == ["lstm"]


@pytest.mark.parametrize(
    "conf",
    [{"models": ["transformer"]}, {"models": []}, {"epochs": 0}, {"negatives": "four"}, {"gamma": -1},
     {"start_date": "2026-13-01"}, {"baselines": ["bm26"]}, {"device": "tpu"}, {"ncell": [0]}, {"profile": "huge"},
     {"simulate_days": -1}],
)
def test_bad_retrain_params_are_refused_with_the_reason(dagbag: Any, conf: dict[str, Any]) -> None:
    from airflow.sdk.exceptions import ParamValidationError

    params = _retrain_params(dagbag)
    with pytest.raises(ParamValidationError) as err:
        params.update(conf)
        params.validate()
    assert next(iter(conf)) in str(err.value)


def test_the_profiles_are_the_runs_and_overrides_make_a_grid(dagbag: Any) -> None:
    """A scheduled run trains deepsent run's quick profile; profile=full is the Table IV grid; overrides make any grid."""
    from deepsent.profiles import PROFILES, resolve_profile

    defaults = _retrain_params(dagbag).validate()
    assert resolve_profile(defaults) == PROFILES["quick"]  # the same declaration as `deepsent run`, recipe included
    assert resolve_profile({**defaults, "profile": "full"}) == PROFILES["full"]
    table_iv = {**defaults, "models": ["lstm", "dssm", "clsm", "rnn", "bilstm"], "ncell": [32, 64, 96]}
    grid = resolve_profile(table_iv).models
    labels = sorted((g.model, tuple(g.tower.items())) for g in grid)
    assert labels == sorted([("lstm", (("ncell", n),)) for n in (32, 64, 96)] + [("bilstm", (("ncell", n),)) for n in (32, 64, 96)]
                            + [("rnn", (("nhid", n),)) for n in (32, 64, 96)] + [("dssm", ()), ("clsm", ())])
    assert all(g.negatives == 4 and g.epochs == PROFILES["quick"].models[0].epochs for g in grid)
    tuned = resolve_profile({**defaults, "learning_rate": 0.1, "epochs": 2, "patience": 1, "gamma": 5.0})
    assert (tuned.lr, tuned.patience, tuned.gamma) == (0.1, 1, 5.0) and {g.epochs for g in tuned.models} == {2}


def test_cross_field_param_errors_are_named(dagbag: Any, tmp_path: Any) -> None:
    from _params import retrain_param_errors

    assert retrain_param_errors({"start_date": "2026-01-02", "end_date": "2026-01-03"}) == []
    assert retrain_param_errors({"end_date": "2026-01-03"}) == ["end_date is set but start_date is empty"]
    assert "before start_date" in retrain_param_errors({"start_date": "2026-01-05", "end_date": "2026-01-03"})[0]
    missing = str(tmp_path / "nope.csv")
    assert retrain_param_errors({"judgments": missing}) == [f"judgments: no such file {missing}"]
    assert retrain_param_errors({"gate_judgments": missing}) == [f"gate_judgments: no such file {missing}"]


def test_unknown_conf_keys_are_named_with_the_known_ones(dag_params: Any) -> None:
    retrain_params, unknown_param_errors = dag_params.retrain_params, dag_params.unknown_param_errors
    assert unknown_param_errors({"epochs": 1}, retrain_params()) == []
    assert unknown_param_errors(None, retrain_params()) == []
    [error] = unknown_param_errors({"epoch": 1, "epochs": 1}, retrain_params())
    assert error.startswith("unknown param 'epoch' (known: baselines, batch_size, device, end_date, epochs, ")
