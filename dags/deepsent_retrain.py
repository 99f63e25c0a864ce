"""deepsent_retrain: clicks -> pairs -> features -> trained models -> embeddings -> table -> promotion.

Runs weekly (``DEEPSENT_RETRAIN_CRON``, Monday 03:00 UTC) and whenever ``DEEPSENT_RETRAIN_EVERY_DAYS``
(default 7) new days of clicks have landed since the last retrain (asset ``deepsent_new_clicks``,
emitted by deepsent_ingest), whichever comes first. A scheduled run trains the default params: the
quick profile's LSTM-RNN (ncell 96) and DSSM; the Table IV grid is a manual trigger's choice.
Training is one mapped task per grid point (``models`` x ``ncell`` for the recurrent towers), each
an MLflow run tagged with this DAG run's id (``airflow.dag_run_id``); the MLflow run id is in the
task's XCom and log. The best model (``encoders.training.results.select_best``, the runner's rule) embeds
the corpus; the ``device`` param is the device of every task (training and embedding); every trained model is
compared with the baselines on the judged set, and the table is published to ``reports/latest/``
(asset ``deepsent_report``). The best model is then offered for promotion (``eval.promotion``): when
it becomes the champion, asset ``deepsent_champion`` is updated and deepsent_index indexes it.
Training tasks go to ``DEEPSENT_TRAIN_QUEUE``/``DEEPSENT_TRAIN_POOL``. A conf key that is not a param
fails the first task at once, naming it and the known ones.
"""
from __future__ import annotations

from typing import Any

from _assets import CHAMPION, CHAMPION_ALIAS, REPORT, retrain_schedule
from _params import DEFAULT_ARGS, START_DATE, TRAIN_POOL, TRAIN_QUEUE, retrain_params
from airflow.sdk import dag, get_current_context, task


@dag(
    dag_id="deepsent_retrain",
    schedule=retrain_schedule(),
    start_date=START_DATE,
    catchup=False,
    max_active_runs=1,
    default_args=DEFAULT_ARGS,
    params=retrain_params(),
    tags=["deepsent"],
    doc_md=__doc__,
)
def deepsent_retrain() -> None:
    """Featurise, train the grid, embed with the best model, compare, publish, promote."""

    @task(retries=0)
    def check_params(params: dict[str, Any] | None = None, dag_run: Any = None) -> dict[str, Any]:
        """Checks a JSON schema cannot express (unknown conf keys included); a bad trigger fails here at once."""
        from _params import retrain_param_errors, unknown_param_errors
        from _wiring import date_range
        from airflow.sdk.exceptions import AirflowFailException

        errors = unknown_param_errors(dag_run.conf, retrain_params()) + retrain_param_errors(params or {})
        if errors:
            raise AirflowFailException("bad params: " + "; ".join(errors))
        return {"dates": [d.isoformat() for d in date_range(params.get("start_date"), params.get("end_date"))]}

    @task
    def ingest_range(plan: dict[str, Any], params: dict[str, Any] | None = None) -> dict[str, Any]:
        """(Re)ingest the landing days of the date range, if one was given (idempotent)."""
        import datetime as dt

        from _wiring import log_result, stage_settings, xcom_value

        from pipeline.ingest.ingest import ingest_dates

        if not plan["dates"]:
            return {"dates": []}
        result = ingest_dates(stage_settings(params), [dt.date.fromisoformat(d) for d in plan["dates"]])
        log_result("ingest", result)
        return xcom_value(result, drop=("per_date",))

    @task
    def pairs(_ingested: dict[str, Any], params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Clicked (query, title) pairs of every ingested day, split train/valid by query."""
        from _wiring import log_result, stage_settings, xcom_value

        from pipeline.features.pairs import build_pairs

        result = build_pairs(stage_settings(params), seed=params["seed"])
        log_result("pairs", result)
        return xcom_value(result)

    @task
    def featurize(_pairs: dict[str, Any], params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Letter-trigram feature shards with n negatives (Dask workers are forked: see stack.md)."""
        from _wiring import log_result, stage_settings, xcom_value

        from pipeline.features.featurize import featurize as featurize_stage

        result = featurize_stage(stage_settings(params), negatives=params["negatives"], seed=params["seed"])
        log_result("featurize", result)
        return xcom_value(result, drop=("shards",))

    @task
    def model_grid(features: dict[str, Any], params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """One training config per grid point: each model type, and each size for recurrent towers."""
        from _params import training_grid

        return training_grid(params, features["version"])

    @task(queue=TRAIN_QUEUE, pool=TRAIN_POOL, map_index_template="{{ grid_point }}")
    def train(config: dict[str, Any], params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Train one grid point as an MLflow run tagged with this DAG run; a retry resumes its checkpoint.

        Airflow stops a task with SIGTERM: it raises here, so the MLflow run ends KILLED, not RUNNING."""
        from _wiring import log_mlflow_at_its_levels, log_result, run_tags, stage_settings, xcom_value

        from encoders.training.trainer import TrainConfig
        from encoders.training.trainer import train as train_stage
        from pipeline.core.interrupt import sigterm_raises

        log_mlflow_at_its_levels()
        context = get_current_context()
        context["grid_point"] = "-".join([config["model"], *map(str, config["tower"].values())])
        retrying = context["ti"].try_number > 1
        with sigterm_raises():
            result = train_stage(stage_settings(params), TrainConfig(**config, resume=retrying), tags=run_tags(context))
        log_result("train", result)
        print(f"MLflow run id: {result.run_id} ({result.model_uri})")
        return xcom_value(result, drop=("history",))

    @task
    def pick_best(results: list[dict[str, Any]]) -> dict[str, Any]:
        """The trained model with the best validation MRR (held-out click pairs; the dev set is never used)."""
        from _wiring import xcom_value

        from encoders.training.results import TrainResult, select_best

        return xcom_value(select_best(TrainResult.from_dict(r) for r in results), drop=("history",))

    @task
    def embed(best: dict[str, Any], params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Embed every title of the corpus and the judged queries with the best model."""
        from pathlib import Path

        from _wiring import log_mlflow_at_its_levels, log_result, stage_settings, xcom_value

        from encoders.search.embed import embed as embed_stage

        log_mlflow_at_its_levels()
        judgments = [Path(params["judgments"])] if params["judgments"] else None
        result = embed_stage(stage_settings(params), best["model_uri"], judgments=judgments)
        log_result("embed", result)
        return xcom_value(result)

    @task
    def compare(
        results: list[dict[str, Any]], _embedded: dict[str, Any], params: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Every trained model against the baselines on the judged set (NDCG@1/3/10, significance)."""
        from _wiring import log_mlflow_at_its_levels, log_result, report_name, run_tags, stage_settings, xcom_value

        from eval.compare import compare as compare_stage

        log_mlflow_at_its_levels()
        context = get_current_context()
        result = compare_stage(
            stage_settings(params),
            judgments=params["judgments"],
            fmt=params["judgments_format"],
            models=[r["model_uri"] for r in results],
            baselines=params["baselines"],
            seed=params["seed"],
            tags=run_tags(context),
            report_name=report_name(context["ti"].run_id),
        )
        log_result("compare", result)
        return xcom_value(result)

    @task(outlets=[REPORT])
    def publish(report: dict[str, Any], outlet_events: Any = None) -> dict[str, Any]:
        """Copy the run's table files to reports/latest/ (overwritten: a retry never duplicates)."""
        from _wiring import stage_settings

        from pipeline.core.store import Store

        store = Store.from_settings(stage_settings())
        published = {name: store.write_bytes(f"reports/latest/{name}", store.read_bytes(uri))
                     for name, uri in report["report"].items()}
        print(report["table_markdown"])
        source = {"report_name": report["report_name"], "mlflow_run_id": report["mlflow_run_id"]}
        outlet_events[REPORT].extra = source
        return {"published": published, **source}

    @task(outlets=[CHAMPION_ALIAS])
    def promote(best: dict[str, Any], _report: dict[str, Any], params: dict[str, Any] | None = None,
                outlet_events: Any = None) -> dict[str, Any]:
        """Offer the best model for promotion; only a promotion updates deepsent_champion (so deepsent_index runs)."""
        from pathlib import Path

        from _wiring import log_mlflow_at_its_levels, log_result, run_tags, stage_settings, xcom_value

        from eval.promotion import promote as promote_stage

        log_mlflow_at_its_levels()
        context = get_current_context()
        gate = Path(params["gate_judgments"]) if params["gate_judgments"] else None
        result = promote_stage(stage_settings(params), best["model_uri"], gate_judgments=gate,
                               force=params["force_promotion"], tags=run_tags(context))
        log_result("promote", result)
        if result.decision == "promoted":
            champion = {"model_uri": result.model_uri, "version": result.version, "challenger_uri": best["model_uri"],
                        "dag_run_id": context["ti"].run_id}
            outlet_events[CHAMPION_ALIAS].add(CHAMPION, extra=champion)
        return xcom_value(result)

    features = featurize(pairs(ingest_range(check_params())))
    # A mapped task does not take its docstring as doc_md (an unmapped one does): give it explicitly.
    trained = train.override(doc_md=train.__doc__).expand(config=model_grid(features))
    best = pick_best(trained)
    report = compare(trained, embed(best))
    publish(report)
    promote(best, report)


deepsent_retrain()
