"""Report of a run directory (socialgym.experiments.analysis.report.build_report).

The run directories are written by hand here, following the run-directory format, so these
tests do not depend on the runner. The last test renders the report in headless Chromium (when
installed) and checks that every embedded image decodes.
"""

import csv
import json
import re
import subprocess

import numpy as np
import pytest

import scipy.sparse as sp
from capabilities import need_chromium, need_module

need_module("matplotlib")                      # the report's figures

import socialgym.experiments.analysis.report as report  # noqa: E402
build_report = report.build_report

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
COMPONENTS = ["SOC", "INF", "PRE", "COORD", "EMO"]
ROUND_COLUMNS = (["round", "agent", "group", "policy", "coached"] + COMPONENTS
                 + ["total", "POST", "COM", "DM", "NOT", "votes_up", "votes_down", "invalid",
                    "fallbacks"])
NETWORK_COLUMNS = ["round", "n_edges", "density", "clustering", "lcc_fraction",
                   "avg_shortest_path", "modularity", "homophily", "directed_density",
                   "directed_clustering", "n_ties", "mean_tie", "max_tie", "mean_topic_entropy",
                   "deep_cocoon_share", "author_exposure_gini", "cross_cutting_share"]
CORE_PLOTS = {"rewards.png", "network.png", "degree.png", "ties_graph.png"}


def write_run(path, *, n_agents=4, n_rounds=3, groups=("left", "left", "right", "right"),
              coached=(1, 0, 1, 0), cocoon_nan=False, empty_ties=False, config=None,
              events=True, network=True, ties=True):
    """A synthetic run directory; returns its path."""
    path.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    agents = [f"agent_{i}" for i in range(n_agents)]
    group_names = sorted({g for g in groups if g})

    with (path / "rounds.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(ROUND_COLUMNS)
        for r in range(1, n_rounds + 1):
            for i, a in enumerate(agents):
                comps = rng.normal(0.1 * r, 0.05, size=5).round(4).tolist()
                w.writerow([r, a, groups[i], "greedy" if coached[i] else "random", coached[i],
                            *comps, round(sum(comps) / 5, 4), 1, 0, 1, 0, 2, 1, 0, 0])

    final_network = {}
    if network:
        per_group = ([f"deep_cocoon_share:{g}" for g in group_names]
                     + [f"cross_cutting_share:{g}" for g in group_names])
        header = (NETWORK_COLUMNS + per_group
                  + ["mean_total", "llm_calls", "prompt_tokens", "completion_tokens"])
        with (path / "network.csv").open("w", newline="") as f:
            w = csv.writer(f)
            w.writerow(header)
            for r in range(1, n_rounds + 1):
                cocoon = ["nan", ""] if cocoon_nan else [1.2 + 0.1 * r, 0.25 * r / n_rounds]
                row = ([r, r, 0.3 * r / n_rounds, 0.2, 1.0, 1.5, 0.1 * r, "", 0.1, 0.0, 2 * r,
                        0.05 * r, 0.4]
                       + cocoon + [0.3, 0.5]
                       + [("" if cocoon_nan else 0.1 * r) for _ in group_names]
                       + [0.5 for _ in group_names] + [0.2, 0, 0, 0])
                w.writerow(row)
        final_network = dict(zip(header[1:], [str(c) for c in row[1:]]))

    if ties:
        (path / "ties").mkdir(exist_ok=True)
        for r in range(1, n_rounds + 1):
            W = np.zeros((n_agents, n_agents), dtype=np.float32)
            if not empty_ties:
                W[0, 1] = W[1, 0] = 0.3 * r
                W[2, 3] = 0.5
                W[1, 2] = 0.25            # (W + W^T)/2 = 0.125 >= 0.1: an edge
                W[3, 0] = 0.15            # (W + W^T)/2 = 0.075 < 0.1: no edge
            sp.save_npz(path / "ties" / f"round_{r:04d}.npz", sp.csr_matrix(W))

    if events:
        with (path / "events.jsonl").open("w") as f:
            f.write(json.dumps({"round": 1, "kind": "POST", "sender": "agent_0", "recipient": None,
                                "mentions": [], "id": 1, "target_id": None, "topic": "sports",
                                "sentiment": 0.2, "text": "hello <b>world</b>"}) + "\n")
            f.write(json.dumps({"round": 1, "kind": "VOTE", "sender": "agent_1",
                                "recipient": "agent_0", "id": 1, "value": 1}) + "\n")
            f.write(json.dumps({"round": 1, "kind": "TIE", "src": 1, "dst": 0, "before": 0.0,
                                "after": 0.3, "evidence": "vote"}) + "\n")

    if config is not None:
        (path / "config.yaml").write_text(config)

    summary = {
        "status": "complete", "rounds_completed": n_rounds, "max_rounds": n_rounds,
        "n_agents": n_agents, "agents": agents,
        "groups": {a: g for a, g in zip(agents, groups) if g},
        "seed": 7, "condition": {"rewards.lambda_SOC": 0.5}, "replicate": 0,
        "final": {"rewards": {c: 0.1 for c in COMPONENTS + ["total"]}, "network": final_network},
        "llm": None, "seconds": 1.25,
    }
    (path / "summary.json").write_text(json.dumps(summary))
    return path


def plot_names(run):
    return {p.name for p in (run / "plots").glob("*.png")}


def assert_valid_png(path):
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC, path
    assert len(data) > 2000, path           # a real figure, not an empty image


def assert_self_contained(html, n_plots):
    assert html.count("data:image/png;base64,") == n_plots
    assert len(re.findall(r"<img\b", html)) == n_plots
    lowered = html.lower()
    for attr in ("src", "href"):
        assert f'{attr}="http' not in lowered and f"{attr}='http" not in lowered
        assert f'{attr}="//' not in lowered
    assert "@import" not in lowered and "url(" not in lowered


# --------------------------------------------------------------------------- files

def test_full_run_writes_every_plot_and_a_self_contained_report(tmp_path):
    run = write_run(tmp_path / "run", config="seed: 7\nrounds: 3\n")
    out = build_report(run)
    assert out == run / "report.html" and out.is_file()
    names = plot_names(run)
    assert names == CORE_PLOTS | {"learning_curves.png", "rewards_by_group.png"}
    for name in names:
        assert_valid_png(run / "plots" / name)
    html = out.read_text()
    assert_self_contained(html, len(names))
    assert html.lstrip().startswith("<!DOCTYPE html>")
    assert "<title>" in html and "Content-Security-Policy" in html
    assert "complete" in html and "1.2 s" in html           # status, seconds
    assert "rewards.lambda_SOC = 0.5" in html                # condition
    assert "rounds: 3" in html                               # config text
    for name in names:
        assert f"<b>{name}</b>" in html                      # every plot has a caption
    for metric in ("SOC", "COORD", "total", "density", "modularity"):
        assert f"<th>{metric}</th>" in html                  # final-value tables


@pytest.mark.slow
def test_learning_curves_only_with_coached_and_uncoached_agents(tmp_path):
    for coached in ((0, 0, 0, 0), (1, 1, 1, 1)):
        run = write_run(tmp_path / f"run_{coached[0]}", coached=coached)
        build_report(run)
        assert "learning_curves.png" not in plot_names(run)
        html = (run / "report.html").read_text()
        assert html.count("data:image/png;base64,") == len(plot_names(run))


@pytest.mark.slow
def test_stale_optional_plot_is_removed(tmp_path):
    run = write_run(tmp_path / "run")
    build_report(run)
    assert "learning_curves.png" in plot_names(run)
    write_run(run, coached=(0, 0, 0, 0))                     # same directory, no coached agent
    build_report(run)
    assert "learning_curves.png" not in plot_names(run)


@pytest.mark.slow
def test_no_groups_no_group_plot(tmp_path):
    run = write_run(tmp_path / "run", groups=("", "", "", ""))
    build_report(run)
    assert "rewards_by_group.png" not in plot_names(run)
    assert CORE_PLOTS <= plot_names(run)


def test_strings_from_files_are_escaped(tmp_path):
    evil = "<script>alert('x')</script>"
    run = write_run(tmp_path / "run", config=f"name: \"{evil}\"\nnote: a & b\n",
                    groups=(evil, evil, "b&b", "b&b"))
    summary = json.loads((run / "summary.json").read_text())
    summary["status"] = "<b>done</b>"
    summary["condition"] = {"agents.persona": evil}
    (run / "summary.json").write_text(json.dumps(summary))
    html = build_report(run).read_text()
    assert "<script" not in html.lower()
    assert "<b>done</b>" not in html
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in html
    assert "a &amp; b" in html
    assert "&lt;b&gt;done&lt;/b&gt;" in html


def test_one_round_empty_ties_nan_cocoon_minimal_files(tmp_path):
    run = write_run(tmp_path / "run", n_rounds=1, empty_ties=True, cocoon_nan=True,
                    events=False, coached=(0, 0, 0, 0), groups=("", "", "", ""))
    summary = json.loads((run / "summary.json").read_text())
    summary["final"] = {}                                    # tables fall back to the CSVs
    (run / "summary.json").write_text(json.dumps(summary))
    html = build_report(run).read_text()
    assert plot_names(run) == CORE_PLOTS
    for name in CORE_PLOTS:
        assert_valid_png(run / "plots" / name)
    assert_self_contained(html, len(CORE_PLOTS))
    assert "No config.yaml" in html
    assert "mean_topic_entropy" in html                      # named as not drawn
    assert "No pair of agents has a tie" in html


@pytest.mark.slow
def test_missing_network_and_ties_still_reports(tmp_path):
    run = write_run(tmp_path / "run", network=False, ties=False, events=False)
    (run / "summary.json").write_text(json.dumps({"status": "running"}))   # a bare summary
    html = build_report(run).read_text()
    assert CORE_PLOTS <= plot_names(run)
    assert_self_contained(html, len(plot_names(run)))
    assert "running" in html


@pytest.mark.slow
def test_truncated_last_line_and_empty_rounds(tmp_path):
    run = write_run(tmp_path / "run")
    with (run / "rounds.csv").open("a") as f:
        f.write("4,agent_0,left,gre")                        # the runner was mid-write
    build_report(run)
    (run / "rounds.csv").write_text(",".join(ROUND_COLUMNS) + "\n")
    build_report(run)
    assert_valid_png(run / "plots" / "rewards.png")


@pytest.mark.parametrize("missing", ["rounds.csv", "summary.json"])
def test_missing_required_file(tmp_path, missing):
    run = write_run(tmp_path / "run")
    (run / missing).unlink()
    with pytest.raises(FileNotFoundError, match=re.escape(missing)):
        build_report(run)


def test_degree_plot_uses_the_network_metrics_graph():
    from socialgym.metrics import network_metrics
    W = np.zeros((5, 5))
    W[0, 1], W[1, 0] = 0.3, 0.1      # mean 0.2: edge
    W[1, 2] = 0.2                    # mean 0.1 == threshold: edge
    W[4, 3] = 0.15                   # mean 0.075: no edge although W[4, 3] >= 0.1
    degrees = np.diff(report._undirected_ties(sp.csr_matrix(W)).indptr)
    assert np.bincount(degrees).tolist() == network_metrics(W)["degree_histogram"]


def test_import_socialgym_does_not_import_matplotlib():
    import sys
    code = ("import sys, socialgym, socialgym.experiments.analysis.report; "
            "print('matplotlib' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


# --------------------------------------------------------------------------- browser

def run_chromium(chromium, profile, *args):
    cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
           "--no-first-run", "--disable-background-networking", "--disable-component-update",
           "--disable-sync", "--disable-dev-shm-usage", f"--user-data-dir={profile}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


@pytest.mark.slow
def test_report_renders_in_headless_chromium(tmp_path):
    chromium = need_chromium()
    run = write_run(tmp_path / "run", config="seed: 7\n")
    html = build_report(run).read_text()
    n_images = html.count("data:image/png;base64,")

    # The report's policy allows no script; the probe copy allows inline scripts only, so images
    # still load under img-src data: alone, i.e. without any network access.
    assert "default-src 'none'; img-src data:;" in html
    probe = html.replace("default-src 'none';",
                         "default-src 'none'; script-src 'unsafe-inline';", 1)
    probe = probe.replace("</body>", """<script>
window.addEventListener("load", function () {
  var ok = 0, imgs = document.images;
  for (var i = 0; i < imgs.length; i++) { if (imgs[i].complete && imgs[i].naturalWidth > 0) ok++; }
  document.title = "images " + ok + " of " + imgs.length;
});
</script>
</body>""", 1)
    probe_path = tmp_path / "probe.html"
    probe_path.write_text(probe)

    out = run_chromium(chromium, tmp_path / "profile-dom", "--virtual-time-budget=5000",
                       "--dump-dom", probe_path.as_uri())
    assert out.returncode == 0, out.stderr[-2000:]
    m = re.search(r"<title>images (\d+) of (\d+)</title>", out.stdout)
    assert m, out.stdout[:2000]
    assert (int(m.group(1)), int(m.group(2))) == (n_images, n_images)

    shot = tmp_path / "report.png"
    out = run_chromium(chromium, tmp_path / "profile-shot", "--window-size=1200,2400",
                       "--virtual-time-budget=5000", f"--screenshot={shot}",
                       (run / "report.html").as_uri())
    assert out.returncode == 0, out.stderr[-2000:]
    assert shot.is_file() and shot.read_bytes()[:8] == PNG_MAGIC
    assert shot.stat().st_size > 20_000
