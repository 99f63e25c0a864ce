"""Whether the champion has gone stale: who it is, how old, the last challengers and why each was refused.

Every promotion decision is a run of the ``deepsent-promotion`` experiment (:mod:`eval.promotion.promote`);
this module reads them back. A champion that keeps refusing retrained challengers, or that has not
changed for a long time, is *stale*: a scheduled retrain that ships nothing runs green, so
:func:`report_if_stale` says so through the project's notification target (``DEEPSENT_NOTIFY``).
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from pipeline.core.config import Settings
from pipeline.core.results import StageResult

log = logging.getLogger(__name__)

#: Decisions that make (or keep by hand) a version the champion.
CROWNING = ("promoted", "rolled back")
#: What ``--status`` calls a promotion run without a decision (its promote was killed before deciding).
INTERRUPTED = "interrupted"


@dataclass(frozen=True)
class ChampionStatus(StageResult):
    """The champion, since when, the recent decisions (newest first) and the refusals since it was crowned."""

    champion: str | None
    champion_uri: str | None
    crowned_at: float | None  # epoch seconds of the decision that made it the champion
    age_days: float | None
    refusals_in_a_row: int  # distinct challengers refused since the champion was crowned
    decisions: list[dict[str, Any]] = field(default_factory=list)
    summary: str = ""


def _decisions(client: Any, experiment_id: str, last: int) -> list[dict[str, Any]]:
    """The newest ``last`` promotion runs: version, decision, reason, when, and the Airflow run if any. A run a
    killed promote left without a decision reads ``interrupted``."""
    runs = client.search_runs([experiment_id], order_by=["attributes.start_time DESC"], max_results=last)
    return [{"version": r.data.tags.get("deepsent.version"), "decision": r.data.tags.get("deepsent.decision", INTERRUPTED),
             "reason": r.data.tags.get("deepsent.reason") or _interrupted(r), "at": r.info.start_time / 1000.0,
             "mlflow_run_id": r.info.run_id, "status": r.info.status, "dag_run_id": r.data.tags.get("airflow.dag_run_id")}
            for r in runs]


def _interrupted(run: Any) -> str:
    """Why a promotion run has no decision: its promote was stopped before deciding."""
    if run.info.status == "RUNNING":
        return "stopped before deciding; its run is still RUNNING (the next promote ends it KILLED)"
    return f"stopped before deciding (run {run.info.status})"


#: The tag a chain's promotion carries when the ship choice fell back to MiniLM off the shelf (no trained model beat it).
BEATEN_TAG, OFF_THE_SHELF_TAG = "deepsent.trained_beaten_by", "off-the-shelf"


def _refused_since_crowned(client: Any, experiment_id: str) -> int:
    """Distinct challengers refused since the newest decision that crowned a champion (retries of one count once),
    and retrains that offered MiniLM off the shelf again because nothing they trained beat it (one per DAG run)."""
    crowned = [run.info.start_time for decision in CROWNING for run in client.search_runs(
        [experiment_id], filter_string=f"tags.`deepsent.decision` = '{decision}'",
        order_by=["attributes.start_time DESC"], max_results=1)]
    since = f" and attributes.start_time > {max(crowned)}" if crowned else ""
    refused = client.search_runs([experiment_id], filter_string=f"tags.`deepsent.decision` = 'refused'{since}",
                                 max_results=50000)
    # a retrain whose trained models did not beat MiniLM off the shelf, the champion already: it offered nothing new
    beaten = client.search_runs([experiment_id], max_results=50000, filter_string=(
        f"tags.`deepsent.decision` = 'unchanged' and tags.`{BEATEN_TAG}` = '{OFF_THE_SHELF_TAG}'{since}"))
    return (len({run.data.tags.get("deepsent.version") for run in refused})
            + len({run.data.tags.get("airflow.dag_run_id") or run.info.run_id for run in beaten}))


def champion_status(settings: Settings, last: int = 10, now: float | None = None) -> ChampionStatus:
    """The champion of ``deepsent-ranker``, its age, and the last ``last`` promotion decisions (a registry that
    does not exist yet is read as empty, never created)."""
    from encoders.model import ranker_registry as ranker
    from encoders.model.tracking import database_missing
    from eval.promotion.promote import EXPERIMENT

    if database_missing(settings.mlflow_tracking_uri):
        return _with_summary(ChampionStatus(champion=None, champion_uri=None, crowned_at=None, age_days=None,
                                            refusals_in_a_row=0))
    client = ranker.client(settings)
    champion = ranker.alias_version(client, ranker.CHAMPION)
    number = None if champion is None else str(champion.version)
    experiment = client.get_experiment_by_name(EXPERIMENT)
    decisions = _decisions(client, experiment.experiment_id, max(last, 1)) if experiment else []
    refusals = _refused_since_crowned(client, experiment.experiment_id) if experiment else 0
    crowned = next((d["at"] for d in decisions if d["decision"] in CROWNING and d["version"] == number), None)
    if crowned is None and champion is not None:
        crowned = champion.creation_timestamp / 1000.0
    age = None if crowned is None else ((now or time.time()) - crowned) / 86400.0
    status = ChampionStatus(champion=number, champion_uri=ranker.version_uri(number) if number else None,
                            crowned_at=crowned, age_days=age, refusals_in_a_row=refusals, decisions=decisions[:last])
    return _with_summary(status)


def _with_summary(status: ChampionStatus) -> ChampionStatus:
    import dataclasses

    if status.champion is None:
        head = "no champion yet (deepsent-ranker@champion is not set)"
    else:
        head = (f"champion: deepsent-ranker version {status.champion}, champion for {status.age_days:.1f} day(s); "
                f"{status.refusals_in_a_row} challenger(s) refused since")
    lines = [head] + [f"  {time.strftime('%Y-%m-%d %H:%M', time.gmtime(d['at']))} version {d['version']}: "
                      f"{d['decision']} - {d['reason']}" for d in status.decisions]
    return dataclasses.replace(status, summary="\n".join(lines))


def stale_reason(status: ChampionStatus, max_refusals: int, max_days: float) -> str:
    """Why the champion is stale (refused ``max_refusals`` times in a row, or older than ``max_days``), else ""."""
    if status.champion is None:
        return ""
    reasons = []
    if status.refusals_in_a_row >= max_refusals:
        reasons.append(f"{status.refusals_in_a_row} retrained challengers refused in a row (limit {max_refusals})")
    if status.age_days is not None and status.age_days > max_days:
        reasons.append(f"champion for {status.age_days:.1f} days (limit {max_days:g})")
    return f"deepsent-ranker version {status.champion} is stale: " + "; ".join(reasons) if reasons else ""


def report_if_stale(settings: Settings, max_refusals: int, max_days: float, tags: dict[str, str] | None = None) -> str:
    """Notify (``DEEPSENT_NOTIFY``) and log a warning when the champion is stale; returns why, else ""."""
    from pipeline.runtime.notify import notify_target, send

    status = champion_status(settings, last=max(max_refusals, 1) + 1)
    reason = stale_reason(status, max_refusals, max_days)
    if not reason:
        return ""
    log.warning("%s", reason)
    message = {"event": "champion_stale", "reason": reason, "champion": status.champion,
               "refusals_in_a_row": status.refusals_in_a_row, "age_days": status.age_days,
               "last_decisions": status.decisions[:max_refusals], **{k: v for k, v in (tags or {}).items()}}
    try:
        send(notify_target(), message)
    except Exception as exc:  # a notification must never fail the promotion that was decided
        log.error("deepsent: stale-champion notification not sent: %s", exc)
    return reason
