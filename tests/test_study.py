"""The core paper's study as one command (issue 15), against the loopback fake server: the paper
scale end to end with every output, the sweep of conditions, and resume after SIGKILL giving the
same outputs as an uninterrupted study."""

from __future__ import annotations

import hashlib
import json
import random

import pytest
from capabilities import need_module

need_module("openai")
need_module("matplotlib")

from socialgym.experiments import RunError, load_config  # noqa: E402
from socialgym.experiments.studies.ties_coach import REAL_NETWORKS, bands, config_path, run_study  # noqa: E402
from socialgym.experiments.run.sweep import jobs  # noqa: E402
from socialgym.llm.testing import FakeServer, sample_schema, schema_of  # noqa: E402

OUTPUTS = ("task_rewards.csv", "theta_sweep.csv", "claims.json", "claims.md")


def deterministic(body, n):
    """The same reply for the same request, whatever the order requests arrive in."""
    schema = schema_of(body)
    if schema is None:
        return "Solar and wind are getting cheaper every year. What do you think?"
    rng = random.Random(hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest())
    return json.dumps(sample_schema(schema, rng))


def test_configs_are_the_2x2_design_on_common_random_numbers():
    for scale, agents, rounds, reps in (("paper", 30, 15, 3), ("small", 5, 4, 2)):
        cfg = load_config(config_path("ties-coach", scale))
        js = jobs(cfg)
        assert len(js) == 4 * reps
        assert cfg.env["n_agents"] == agents and cfg.env["max_rounds"] == rounds
        cells = {(all(g.coach for g in j.config.policy.groups), j.config.llm.tie_scorer) for j in js}
        assert cells == {(False, False), (False, True), (True, False), (True, True)}
        for k in range(reps):                             # replicate k: the same seed in every condition
            assert {j.seed for j in js if j.replicate == k} == {cfg.seed + k}
        groups = cfg.policy.groups
        assert [g.name for g in groups] == ["SOC", "INF", "PRE", "COORD", "EMO"]
        assert all(g.agents == agents // 5 for g in groups)
        for i, g in enumerate(groups):                    # 0.6 on the group's own reward
            assert list(g.lambdas) == [0.6 if j == i else 0.1 for j in range(5)]
    with pytest.raises(Exception, match="unknown scale"):
        config_path("ties-coach", "huge")


def test_real_network_bands_are_the_spread_between_the_eight_networks():
    # SD between networks = SE * sqrt(8) = 0.046 * 2.8284 = 0.1301; band = mean +- 1.96 SD
    assert bands()["density"] == pytest.approx((0.197 - 1.96 * 0.1301, 0.197 + 1.96 * 0.1301), abs=1e-4)
    assert set(REAL_NETWORKS) == {"density", "clustering", "lcc_fraction", "avg_shortest_path_norm", "modularity"}


@pytest.mark.slow
def test_paper_scale_end_to_end_on_the_fake_server(tmp_path):
    with FakeServer(deterministic) as server:
        result = run_study("ties-coach", tmp_path / "study", scale="paper", replicates=1,
                           base_url=server.base_url, model="fake", progress=False)
    out = tmp_path / "study"
    assert result["runs"] == 4
    for name in (*OUTPUTS, "study.html", "plots/fig2_task_rewards.png", "plots/fig3_4_theta_sweep.png",
                 "plots/fig5_8_degrees.png", "aggregate.csv"):
        assert (out / name).is_file(), name
    claims = json.loads((out / "claims.json").read_text())
    assert len(claims) == 8
    # paper scale, but one replicate (2 run pairs < 5) on the fake model: below the design, no verdict
    assert all(c["verdict"] == "not tested at this scale" for c in claims)
    assert all("fake is not a model named capable enough (evidence.CAPABLE_MODELS)" in c["shortfalls"]
               for c in claims)
    rows = (out / "task_rewards.csv").read_text().splitlines()
    assert len(rows) == 1 + 4 * 5 * 15                    # 4 runs x 5 task groups x 15 rounds
    sweep = (out / "theta_sweep.csv").read_text().splitlines()
    assert len(sweep) == 1 + 4 * 10                       # 4 runs x 10 thresholds
    page = (out / "study.html").read_text()
    assert page.count("data:image/png;base64,") == 3 and "report.html" in page
    assert "<h2>Realism scorecard</h2>" in page and page.count("<h3>") == 4       # one per condition


@pytest.mark.slow
def test_study_resumes_after_sigkill_with_identical_outputs(tmp_path, monkeypatch):
    with FakeServer(deterministic) as server:
        whole = run_study("ties-coach", tmp_path / "whole", scale="small", replicates=1,
                          base_url=server.base_url, model="fake", progress=False)
        monkeypatch.setenv("SOCIALGYM_KILL_AT", "2:outputs")          # the first run dies in round 2
        with pytest.raises(RunError):
            run_study("ties-coach", tmp_path / "killed", scale="small", replicates=1,
                      base_url=server.base_url, model="fake", progress=False)
        assert not (tmp_path / "killed" / "claims.json").exists()
        monkeypatch.delenv("SOCIALGYM_KILL_AT")
        again = run_study("ties-coach", tmp_path / "killed", scale="small", progress=False)   # resume
    assert whole["claims"] == again["claims"]
    for name in OUTPUTS:
        assert (tmp_path / "whole" / name).read_bytes() == (tmp_path / "killed" / name).read_bytes(), name
