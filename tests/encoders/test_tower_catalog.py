"""The tower catalog: one declaration per model, read without torch, and every front door agrees with it."""
from __future__ import annotations

import dataclasses
import importlib
import inspect
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from deepsent.cli import build_parser
from deepsent.profiles import PROFILES, resolve_profile
from encoders.towers.tower_catalog import scan, tower_names, tower_settings, towers, trainable_tower_names
from encoders.towers.tower_classes import build_tower, display_name
from pipeline.core.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


def test_the_catalog_reads_what_each_module_declares() -> None:
    for name, spec in towers().items():
        module = importlib.import_module(spec.module)
        assert dataclasses.replace(module.SPEC, module=spec.module) == spec, name  # the file's literal is what it builds
        cls = getattr(module, spec.cls)
        init = list(inspect.signature(cls.__init__).parameters)[2:]  # self, vocab_size
        assert init == list(spec.defaults), f"{name}: __init__ takes {init}, SPEC declares {list(spec.defaults)}"


def test_reading_the_catalog_does_not_import_torch() -> None:
    code = "import sys, encoders.towers.tower_catalog as c; c.towers(); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_new_tower_file_is_found_and_a_bad_declaration_is_refused(tmp_path: Path) -> None:
    (tmp_path / "mytower.py").write_text(
        "from encoders.towers.tower_catalog import TowerSpec\n"
        "SPEC = TowerSpec(name='mine', label='Mine', cls='MyTower', size_keys=('width',), defaults={'width': 8})\n")
    (tmp_path / "helper.py").write_text("X = 1\n")
    found = scan(tmp_path)
    assert list(found) == ["mine"] and found["mine"].module == "encoders.towers.mytower"
    assert found["mine"].display_name({"width": 16}) == "Mine (width=16)"
    (tmp_path / "bad.py").write_text("from encoders.towers.tower_catalog import TowerSpec\nSPEC = TowerSpec(name=str(1), label='B', cls='B')\n")
    with pytest.raises(ConfigError, match="bad.py: every argument of SPEC must be a literal"):
        scan(tmp_path)


def test_cli_dag_and_profiles_derive_from_the_catalog(dag_params: ModuleType) -> None:
    parser = build_parser()
    train = parser._subparsers._group_actions[0].choices["train"]  # noqa: SLF001 (argparse has no public accessor)
    by_dest = {a.dest: a for a in train._actions}
    assert list(by_dest["model"].choices) == trainable_tower_names() == [n for n in tower_names() if n != "ensemble"]
    assert set(tower_settings()) <= set(by_dest), "every tower setting has a flag"
    assert "mix" not in by_dest, "the assembled ensemble's settings are not training flags"
    params = dag_params
    assert params.MODEL_TYPES == trainable_tower_names()
    grid = resolve_profile({"models": params.MODEL_TYPES, "ncell": [8]}).models  # the trigger form's grid
    assert {spec.model: dict(spec.tower) for spec in grid} == {
        n: ({s.size_keys[0]: 8} if s.recurrent else {}) for n, s in towers().items() if n in params.MODEL_TYPES}
    for profile in PROFILES.values():
        for spec in profile.models:
            assert spec.model in towers()
            towers()[spec.model].resolve(spec.tower)  # every profile's config is valid for its tower


def test_labels_are_the_table_iv_labels() -> None:
    assert display_name("lstm", {"ncell": 32}) == "LSTM-RNN (ncell=32)"
    assert display_name("dssm") == "DSSM (nhid=288/96)"
    assert display_name("clsm", {"win": 5}) == "CLSM (win=5)"
    assert display_name("rnn") == "RNN (nhid=288)"
    assert display_name("bilstm") == "Bidirectional LSTM-RNN (ncell=96)"
    assert towers()["rnn"].step_size == 0.03 and towers()["lstm"].step_size == 0.1


@pytest.mark.parametrize("config, reason", [
    ({"ncell": 0}, "ncell=0 must be at least 1"),
    ({"init_scale": -1.0}, "init_scale=-1.0 must be above 0"),
    ({"ncell": "abc"}, "ncell='abc' is not a int"),
    ({"forget_gate": "maybe"}, "forget_gate='maybe' is not a boolean"),
    ({"width": 3}, "has no setting width"),
])
def test_bad_tower_settings_are_refused_before_building(config: dict, reason: str) -> None:
    with pytest.raises(ConfigError, match=reason):
        build_tower("lstm", 50, **config)


def test_defaults_come_from_one_place(dag_params: ModuleType) -> None:
    from encoders.training.trainer import TrainConfig
    from pipeline.core.defaults import EPOCHS, GAMMA, NEGATIVES, PATIENCE, SEED

    parser = build_parser()
    for argv in (["train", "--model", "lstm"], ["featurize"]):
        args = parser.parse_args(argv)
        assert (args.negatives, args.seed) == (NEGATIVES, SEED), argv
    train = parser.parse_args(["train", "--model", "lstm"])
    assert (train.epochs, train.gamma, train.patience) == (EPOCHS, GAMMA, PATIENCE)
    config = TrainConfig()
    assert (config.negatives, config.seed, config.epochs, config.gamma, config.patience) == (
        NEGATIVES, SEED, EPOCHS, GAMMA, PATIENCE)
    retrain = dag_params.retrain_params()
    assert retrain["seed"].value == SEED
    assert all(retrain[key].value is None for key in ("negatives", "epochs", "gamma", "patience"))  # the profile's
    assert resolve_profile({}).gamma == GAMMA and {m.negatives for m in resolve_profile({}).models} == {NEGATIVES}
