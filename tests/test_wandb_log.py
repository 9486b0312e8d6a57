"""WandbLogger: an offline run under the run directory, the logged values, and no secret in it."""

from __future__ import annotations

import os
import struct
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
from capabilities import need_module
import scipy.sparse as sp

wandb = need_module("wandb")

from socialgym.experiments.run.wandb_log import WandbLogger  # noqa: E402
from socialgym.llm.sanitize import drop_secrets as sanitize_config  # noqa: E402

SETTINGS = {"project": "socialgym-test", "mode": "offline", "tags": ["t"], "sample_posts": 2, "graph_every": 2}
CONFIG = {"seed": 1, "llm": {"api_key": "sk-test-SECRET-456", "model": "m", "nested": [{"Auth_Token": "x"}]}}
COMPONENTS = ("SOC", "INF", "PRE", "COORD", "EMO")


@pytest.fixture(autouse=True)
def wandb_env(monkeypatch, tmp_path):
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_MODE", "offline")
    # keep wandb's per-user files (settings, caches) out of the real home directory
    for var in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR"):
        monkeypatch.setenv(var, str(tmp_path / "home" / var.lower()))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-SECRET-123")
    monkeypatch.delenv("WANDB_ERROR_REPORTING", raising=False)


def _rows(r: int) -> list[dict]:
    rows = []
    for i in range(4):
        row = {"round": r, "agent": f"agent_{i}", "group": "left" if i < 2 else "right", "policy": "random",
               "coached": 0}
        row.update({c: 0.1 * (i + 1) * r + 0.01 * k for k, c in enumerate(COMPONENTS)})
        row["total"] = float(i + r)
        row.update(POST=i % 2, COM=1, DM=0, NOT=2 - i % 2, votes_up=1, votes_down=0, invalid=0, fallbacks=0)
        rows.append(row)
    rows[3]["EMO"] = float("nan")    # a NaN reward is ignored by the means
    return rows


def _network(r: int) -> dict:
    return {"round": r, "n_edges": 3 + r, "density": 0.5, "clustering": None, "homophily": "",
            "mean_topic_entropy": float("nan"), "deep_cocoon_share:left": 0.5, "mean_total": 1.0,
            "llm_calls": 0, "prompt_tokens": 10 * r, "completion_tokens": 0}


def _posts(r: int) -> list[dict]:
    return [{"kind": "POST", "sender": "agent_0", "topic": "music", "text": f"post {r}a", "id": 1},
            {"kind": "COM", "sender": "agent_1", "topic": None, "text": f"comment {r}", "id": 2},
            {"kind": "DM", "sender": "agent_2", "topic": "music", "text": "private", "id": 3},
            {"kind": "POST", "sender": "agent_3", "topic": "sports", "text": f"post {r}b", "id": 4}]


def _ties(r: int):
    if r == 1:
        return sp.csr_matrix((4, 4), dtype=np.float32)     # no tie yet
    return sp.csr_matrix(np.array([[0, r, 0, 0], [1, 0, 0, 0], [0, 0, 0, 2], [0, 0, 0.5, 0]], np.float32))


def _records(path: Path):
    """The protobuf records of a .wandb transaction log (LevelDB log format behind a 7-byte header)."""
    from wandb.proto import wandb_internal_pb2 as pb

    data, block, head = path.read_bytes(), 32768, 7
    if len(data) < head:        # not written yet
        return
    assert data[:4] == b":W&B"
    pos, chunk = 7, b""
    while pos + head <= len(data):
        if block - pos % block < head:     # a block's tail too short for a header is padding
            pos += block - pos % block
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos:pos + head])
        if kind == 0:
            break
        piece, pos = data[pos + head:pos + head + length], pos + head + length
        chunk = piece if kind in (1, 2) else chunk + piece     # FULL/FIRST start a record
        if kind in (1, 4):                                      # FULL/LAST end it
            record = pb.Record()
            record.ParseFromString(chunk)
            yield record


def _wait_for_exit_record(path: Path, timeout: float = 15.0) -> None:
    """run.finish() only *informs* wandb-core that the run is over: the service writes the last
    buffered records to the .wandb file a moment later (at the latest when the process exits)."""
    deadline = time.monotonic() + timeout
    while not any(r.WhichOneof("record_type") == "exit" for r in _records(path)):
        assert time.monotonic() < deadline, f"{path} has no exit record after {timeout} s"
        time.sleep(0.05)


def _history(path: Path) -> dict[int, dict[str, str]]:
    """step -> {key: value_json} of every history record (nested keys joined by '/')."""
    out: dict[int, dict[str, str]] = {}
    for rec in _records(path):
        if rec.WhichOneof("record_type") == "history":
            items = {i.key or "/".join(i.nested_key): i.value_json for i in rec.history.item}
            out.setdefault(int(items["_step"]), {}).update(items)
    return out


def test_offline_run_values_and_no_secrets(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "argv", [*sys.argv, "--api-key=sk-test-SECRET-789"])
    started = time.perf_counter()
    with WandbLogger(SETTINGS, tmp_path, CONFIG, name="run-a") as logger:
        for r in (1, 2, 3):
            logger.log_round(r, _rows(r), _network(r), _ties(r), _posts(r))
        # wandb collects host metadata (argv among it) about half a second after init: give it
        # the time to, so that a regression of x_disable_meta would show up below
        time.sleep(1.0)
    assert time.perf_counter() - started < 45
    assert "WANDB_ERROR_REPORTING" not in os.environ      # only set while the run starts

    runs = list((tmp_path / "wandb").glob("offline-run-*"))
    assert len(runs) == 1
    logs = list(runs[0].glob("*.wandb"))
    assert len(logs) == 1
    _wait_for_exit_record(logs[0])

    for f in tmp_path.rglob("*"):
        if f.is_file() and not f.is_symlink():
            blob = f.read_bytes()
            for secret in (b"SECRET-123", b"SECRET-456", b"SECRET-789"):
                assert secret not in blob, f"{secret!r} leaked into {f}"

    history = _history(logs[0])
    assert sorted(history) == [1, 2, 3]
    h1 = history[1]
    rows = _rows(1)
    assert float(h1["rewards/total"]) == pytest.approx(np.mean([r["total"] for r in rows]))
    assert float(h1["rewards/SOC"]) == pytest.approx(np.mean([r["SOC"] for r in rows]))
    assert float(h1["rewards/EMO"]) == pytest.approx(np.mean([r["EMO"] for r in rows[:3]]))   # NaN skipped
    assert float(h1["rewards_by_group/right/total"]) == pytest.approx((rows[2]["total"] + rows[3]["total"]) / 2)
    assert float(h1["actions/POST"]) == 2 and float(h1["actions/COM"]) == 4
    assert float(h1["network/n_edges"]) == 4 and float(h1["network_by_group/left/deep_cocoon_share"]) == 0.5
    assert float(h1["llm/prompt_tokens"]) == 10
    assert "network/clustering" not in h1 and "network/homophily" not in h1
    assert "network/mean_topic_entropy" not in h1 and "network/round" not in h1
    assert "hist/agent_total/values" in h1 and "hist/tie_strength/values" not in h1   # no tie in round 1
    assert "hist/tie_strength/values" in history[2]
    assert "graph/ties/path" in history[2] and "graph/ties/path" not in history[1]
    h3 = history[3]
    assert "graph/ties/path" in h3                                       # the final graph
    assert h3["samples/posts/nrows"] == "6"                              # 2 per round, DMs excluded
    for values in history.values():
        for key, value in values.items():
            assert value.lower() not in ("nan", "infinity", "-infinity"), key

    config = {}
    for rec in _records(logs[0]):
        if rec.WhichOneof("record_type") == "run":
            config = {i.key: i.value_json for i in rec.run.config.update}
    assert "llm" in config and '"model"' in config["llm"] and "api_key" not in config["llm"]
    assert "Auth_Token" not in config["llm"]

    table = list(runs[0].glob("files/media/table/**/*.table.json"))
    assert len(table) == 1
    assert "post 1a" in table[0].read_text() and "private" not in table[0].read_text()
    assert list(runs[0].glob("files/media/images/**/*.png"))


def test_sanitize_config_is_recursive():
    raw = {"a": 1, "API_KEY": "x", "llm": {"api_key": "y", "model": "m", "list": [{"password": 1, "b": 2}]},
           "hf_token": "z", "db": {"client_secret": "s"}}
    assert sanitize_config(raw) == {"a": 1, "llm": {"model": "m", "list": [{"b": 2}]}, "db": {}}
    # counts of tokens are settings, not credentials
    counts = {"llm": {"max_tokens": 64}, "params": {"text_tokens": 38, "plan_tokens": 90, "Auth_Token": "t",
                                                    "hf_tokens": ["t1"], "tokenizer": "x"}}
    assert sanitize_config(counts) == {"llm": {"max_tokens": 64}, "params": {"text_tokens": 38, "plan_tokens": 90}}


def test_disabled_mode_empty_rounds_and_dense_ties(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)                   # e.g. "tie graph skipped"
        logger = WandbLogger({"project": "p", "mode": "disabled", "graph_every": 1}, tmp_path, {})
        logger.log_round(1, [], {"round": 1, "density": float("nan")}, None, ())
        logger.log_round(2, _rows(2), _network(2), sp.csr_matrix((0, 0)), [])
        logger.log_round(3, _rows(3), None, _ties(3).toarray(), _posts(3))
        assert logger._tie_values(_ties(3).toarray()).tolist() == [3, 1, 2, 0.5]
        logger.finish(sp.csr_matrix((4, 4)), {"agent_0": "left"})
    logger.finish()                                                       # idempotent
    with pytest.raises(RuntimeError, match="after finish"):
        logger.log_round(3, [], {})


def test_unknown_key_is_named(tmp_path):
    with pytest.raises(ValueError, match=r"'colour'.*allowed: project, entity"):
        WandbLogger({"project": "p", "colour": "red"}, tmp_path, {})
    assert not (tmp_path / "wandb").exists()


@pytest.mark.parametrize("settings", [{}, {"project": ""}, {"mode": "offline", "project": None}])
def test_project_is_required(tmp_path, settings):
    with pytest.raises(ValueError, match="project is required"):
        WandbLogger(settings, tmp_path, {})


@pytest.mark.parametrize("key, value", [("mode", "dryrun"), ("tags", "a"), ("tags", 3), ("sample_posts", -1),
                                        ("graph_every", True), ("histograms", "yes")])
def test_invalid_values(tmp_path, key, value):
    with pytest.raises(ValueError, match=f"logging.wandb.{key}"):
        WandbLogger({"project": "p", key: value}, tmp_path, {})


def test_missing_wandb_gives_the_pip_hint(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)
    with pytest.raises(RuntimeError, match=r"pip install 'socialgym\[wandb\]'"):
        WandbLogger({"project": "p"}, tmp_path, {})


def test_settings_named_like_tokens_survive_the_written_config(tmp_path):
    """``llm.tie_transcript_tokens`` and model names under ``llm.prices`` are no secrets: a config
    written to disk and read back keeps them (a resumed run must not fall back to defaults)."""
    from socialgym.experiments import load_config
    from socialgym.experiments.define.schema import dump_yaml

    cfg = load_config({"env": {"n_agents": 4, "max_rounds": 2},
                       "policy": {"kind": "llm"},
                       "llm": {"base_url": "http://127.0.0.1:9/v1", "model": "my-token-model", "api_key": "sk-x",
                               "tie_transcript_tokens": 64,
                               "prices": {"my-token-model": {"prompt": 0.5, "completion": 2.0}}}})
    dump_yaml(cfg, tmp_path / "c.yaml")
    text = (tmp_path / "c.yaml").read_text()
    assert "sk-x" not in text and "api_key:" not in text
    again = load_config(tmp_path / "c.yaml")
    assert again.llm.tie_transcript_tokens == 64
    assert dict(again.llm.prices["my-token-model"]) == {"prompt": 0.5, "completion": 2.0}
