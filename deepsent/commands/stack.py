"""``deepsent stack up|down|status [--executor local|celery]``: the local service stack (infra/stack.py)."""
from __future__ import annotations

import argparse
from typing import Any

from pipeline.core import validators as v
from pipeline.core.config import Settings
from pipeline.core.errors import DeepsentError


def register(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add ``stack`` to the CLI."""
    p = subparsers.add_parser(
        "stack", parents=[common], help="start/stop/inspect the local Airflow, MLflow and S3 services",
        description="Local services on 127.0.0.1 (ports: DEEPSENT_AIRFLOW_PORT, DEEPSENT_MLFLOW_PORT, "
        "DEEPSENT_S3_PORT; with --executor celery also DEEPSENT_POSTGRES_PORT, DEEPSENT_REDIS_PORT, "
        "DEEPSENT_DASK_PORT, DEEPSENT_DASK_HTTP_PORT; files: DEEPSENT_STACK_DIR, default .deepsent/stack).",
    )
    p.add_argument("action", choices=["up", "down", "status", "watch"],
                   help="watch: a supervisor that starts again every service that died, every --every seconds")
    p.add_argument("--executor", choices=["local", "celery"], default=None,
                   help="local (default): Airflow's components with LocalExecutor on SQLite; celery: PostgreSQL, "
                   "Redis, Airflow components with two Celery workers (queues default and gpu) and a Dask "
                   "cluster. status and down default to the running stack's")
    p.add_argument("--timeout", type=v.seconds(), default=300.0,
                   help="seconds to wait for each stage's health checks (default 300)")
    p.add_argument("--every", type=v.seconds(), default=30.0, help="watch: seconds between checks (default 30)")
    p.add_argument("--rounds", type=v.up_to(1_000_000), help="watch: checks to make, then exit (default: until stopped)")
    p.set_defaults(handler=run_stack, uses_store=False)  # the stack has its own store settings


def run_stack(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    """Run one stack action and describe the result."""
    from infra import stack

    try:
        cfg = stack.StackConfig.from_env(executor=args.executor)
        if args.action == "up":
            result = stack.up(cfg, timeout=args.timeout)
        elif args.action == "watch":
            result = stack.watch(cfg, every=args.every, rounds=args.rounds, timeout=args.timeout)
            restarts = "; ".join(f"{r['at']} {', '.join(r['services'])}" for r in result["restarted"]) or "none"
            return {**result, "summary": _describe(result) + f"\nrestarted: {restarts}"}
        elif args.action == "down":
            result = stack.down(cfg)
            stopped = ", ".join(f"{n}: {c} processes in {result['seconds'][n]} s" for n, c in result["stopped"].items())
            return {**result, "summary": f"stack stopped ({stopped})"}
        else:
            result = stack.status(cfg)
    except stack.StackError as exc:
        raise DeepsentError(str(exc)) from exc
    return {**result, "summary": _describe(result)}


def _describe(result: dict[str, Any]) -> str:
    lines = [f"executor: {result['executor']}"]
    for svc in result["services"].values():
        state = "healthy" if svc["healthy"] else ("running, not healthy" if svc["running"] else "stopped")
        listens = f"  listens on {', '.join(svc['listeners'])}" if svc.get("listeners") else ""
        lines.append(f"{svc['label']:<30} {state:<22} {svc['url']}{listens}  (log {svc['log']})")
    if "started" in result:
        lines.append(f"started: {', '.join(result['started']) or 'nothing (already up)'}")
    lines.append(f"store of Airflow tasks: {result['store']}")
    lines.append(f"Airflow login: admin, password in {result['password_file']}")
    lines.append(f"use the stack from the CLI: source {result['root']}/client.env")
    return "\n".join(lines)
