"""One settings object for every stage: environment variables, overridden by CLI flags."""
from __future__ import annotations

import os
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Mapping

from pipeline.core import validators
from pipeline.core.defaults import DEVICES, GATE_SLICE

PROJECT_ROOT = Path(__file__).resolve().parents[2]

#: Environment variables read by :meth:`Settings.from_env` (see DESIGN.md, "Interface contract").
ENV_STORE = "DEEPSENT_STORE"
ENV_DATA_DIR = "DEEPSENT_DATA_DIR"
ENV_MLFLOW = "MLFLOW_TRACKING_URI"
ENV_DASK_ADDRESS = "DEEPSENT_DASK_ADDRESS"
ENV_DASK_WORKERS = "DEEPSENT_DASK_WORKERS"
ENV_DEVICE = "DEEPSENT_DEVICE"
ENV_MINILM_RUNTIME = "DEEPSENT_MINILM_RUNTIME"
ENV_GATE = "DEEPSENT_GATE_JUDGMENTS"
#: Accepted values of ``device`` (DEEPSENT_DEVICE, ``--device``).
DEVICE_CHOICE = validators.choice(*DEVICES)


def _default_data_dir() -> Path:
    """`../shared/data` beside the project checkout."""
    return (PROJECT_ROOT.parent / "shared" / "data").resolve()


def _is_s3(uri: str) -> bool:
    return uri.startswith("s3://")


@dataclass(frozen=True)
class Settings:
    """Where things live and how stages run. Holds no secret: AWS keys stay in the environment.

    Attributes:
        store: store root, a local directory (absolute) or ``s3://bucket/prefix``.
        data_dir: folder holding the shared real data (homedepot/, trec_session2013/, books/).
        mlflow_tracking_uri: MLflow tracking URI; default a SQLite file under a local store.
        dask_address: scheduler address of an existing Dask cluster; empty = start a LocalCluster.
        dask_workers: size of the local cluster.
        device: ``auto`` (CUDA when present), ``cpu`` or ``cuda``.
        minilm_runtime: MiniLM's CPU inference runtime (``openvino``, ``torch``; empty: openvino when installed).
            :mod:`encoders.towers.minilm_runtime` reads the variable itself, in any process, through the same validator.
        s3_endpoint_url: S3-compatible endpoint (``AWS_ENDPOINT_URL``), empty for AWS itself.
        s3_region: region for S3 clients.
        gate_judgments: the judged gate set every decision of the chain is made on (the ensemble's mix, the ship
            choice, the promotion gate, the index's served mode): ``gate-slice`` (the demo's slice of the training
            judgments the simulator never reads, the default), a judged file of the team's own, or ``clicks`` (none:
            the held-out click lists decide). ``DEEPSENT_GATE_JUDGMENTS``, ``--gate-judgments``, the DAG's param.
    """

    store: str
    data_dir: Path
    mlflow_tracking_uri: str
    dask_address: str = ""
    dask_workers: int = field(default_factory=lambda: os.cpu_count() or 1)
    device: str = "auto"
    minilm_runtime: str = ""
    s3_endpoint_url: str = ""
    s3_region: str = "us-east-1"
    gate_judgments: str = GATE_SLICE

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: object) -> "Settings":
        """Build settings from ``env`` (default ``os.environ``); non-None ``overrides`` win."""
        env = os.environ if env is None else env
        label = "--store" if overrides.get("store") else ENV_STORE
        store = validators.checked(label, validators.store_root, overrides.get("store") or env.get(ENV_STORE) or ".deepsent")
        store = store if _is_s3(store) else str(Path(store).expanduser().resolve())
        data_dir = Path(str(overrides.get("data_dir") or env.get(ENV_DATA_DIR) or _default_data_dir()))
        mlflow_uri = str(overrides.get("mlflow_tracking_uri") or env.get(ENV_MLFLOW) or "")
        if not mlflow_uri:
            db_dir = Path(store) if not _is_s3(store) else Path(".deepsent").resolve()
            mlflow_uri = f"sqlite:///{db_dir / 'mlflow.db'}"
        workers = overrides.get("dask_workers") or env.get(ENV_DASK_WORKERS) or os.cpu_count() or 1
        device = overrides.get("device") or env.get(ENV_DEVICE) or "auto"
        return cls(
            store=store.rstrip("/") if _is_s3(store) else store,
            data_dir=data_dir.expanduser().resolve(),
            mlflow_tracking_uri=validators.checked(ENV_MLFLOW, validators.tracking_uri, mlflow_uri),
            dask_address=validators.checked(ENV_DASK_ADDRESS, validators.scheduler_address,
                                            overrides.get("dask_address") or env.get(ENV_DASK_ADDRESS) or ""),
            dask_workers=validators.checked(ENV_DASK_WORKERS, validators.up_to(4 * validators.CORES, "a worker count"),
                                            workers),
            device=validators.checked(ENV_DEVICE, DEVICE_CHOICE, device),
            minilm_runtime=validators.checked(ENV_MINILM_RUNTIME, validators.minilm_runtime,
                                              env.get(ENV_MINILM_RUNTIME, "")),
            s3_endpoint_url=str(env.get("AWS_ENDPOINT_URL") or env.get("AWS_ENDPOINT_URL_S3") or ""),
            s3_region=str(env.get("AWS_DEFAULT_REGION") or env.get("AWS_REGION") or "us-east-1"),
            gate_judgments=str(overrides.get("gate_judgments") or env.get(ENV_GATE) or GATE_SLICE),
        )

    def with_overrides(self, **overrides: object) -> "Settings":
        """A copy with the given non-None fields replaced."""
        known = {f.name for f in fields(self)}
        return replace(self, **{k: v for k, v in overrides.items() if v is not None and k in known})

    @property
    def store_is_s3(self) -> bool:
        """True when the store root is an S3 URI."""
        return _is_s3(self.store)

    @property
    def homedepot_dir(self) -> Path:
        """Folder of the Home Depot judgment files."""
        return self.data_dir / "homedepot"

    @property
    def train_judgments(self) -> Path:
        """The training judgments: the only file the click simulator may read."""
        return self.homedepot_dir / "judgments_train.csv"

    @property
    def dev_judgments(self) -> Path:
        """The development test set used for NDCG reports."""
        return self.homedepot_dir / "judgments_dev.csv"

    @property
    def trec_session_xml(self) -> Path:
        """The real TREC 2013 Session track log."""
        return self.data_dir / "trec_session2013" / "sessiontrack2013.xml"

    @property
    def books_dir(self) -> Path:
        """Public-domain novels for the skip-thought baseline."""
        return self.data_dir / "books"

    def public_dict(self) -> dict[str, str]:
        """Settings as strings, safe to print or log (no credentials are held here)."""
        return {f.name: str(getattr(self, f.name)) for f in fields(self)}


#: How an MLflow tracking server is probed before a command uses it: tries, seconds per try, seconds between.
PROBE_TRIES, PROBE_TIMEOUT_S, PROBE_PAUSE_S = 3, 5.0, 2.0


def check_tracking_server(uri: str, tries: int = PROBE_TRIES, timeout: float = PROBE_TIMEOUT_S,
                          pause: float = PROBE_PAUSE_S) -> None:
    """A ConfigError, within ``tries`` probes of ``timeout`` seconds, when an ``http(s)`` MLflow server does not
    answer (a database or file store has nothing to probe): unreachable, never "no champion" minutes later."""
    import time
    import urllib.error
    import urllib.parse
    import urllib.request

    if not uri.startswith(("http://", "https://")):
        return
    parts = urllib.parse.urlsplit(uri)
    shown = f"{parts.scheme}://{parts.hostname or ''}" + (f":{parts.port}" if parts.port else "")  # no credentials
    started, reason = time.monotonic(), ""
    for attempt in range(tries):
        try:
            with urllib.request.urlopen(shown + parts.path.rstrip("/") + "/health", timeout=timeout):
                return
        except urllib.error.HTTPError:
            return  # it answers (a proxy or an older server without /health): reachable
        except (OSError, ValueError) as exc:
            reason = str(getattr(exc, "reason", exc))
        if attempt + 1 < tries:
            time.sleep(pause)
    from pipeline.core.errors import ConfigError

    raise ConfigError(f"MLflow tracking server {shown} is unreachable ({reason}; {tries} tries in "
                      f"{time.monotonic() - started:.0f} s): start it (deepsent stack up) or fix {ENV_MLFLOW}")
