"""The run viewer (socialgym.viewer): the data it embeds, checked against the run's files by
hand, and the page's safety (self-contained, file texts escaped) and its answers to bad input.
The page itself is driven in a real browser by tests/test_viewer_browser.py."""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

import scipy.sparse as sp
from capabilities import need_node

from socialgym.viewer import ViewerError, build_viewer, decode, likes_dislikes, load, tie_matrix  # noqa: E402
from socialgym.viewer.data import transcript_text  # noqa: E402
from socialgym.viewer.page import embed_json  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
EVIL = "<script>alert(1)</script>"
CONFIG = {
    "seed": 5,
    "env": {"n_agents": 8, "max_rounds": 4, "recommender": "random"},
    "policy": {"groups": [{"name": EVIL, "kind": "greedy", "agents": 4}, {"name": "random", "kind": "random"}]},
    "logging": {"report": False, "progress": False},
}


def _write_config(path: Path, data: dict) -> Path:
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    from socialgym.experiments import load_config, run_experiment

    base = tmp_path_factory.mktemp("viewer")
    out = base / "run"
    run_experiment(load_config(_write_config(base / "c.yaml", CONFIG)), out, progress=False)
    return out


@pytest.fixture(scope="module")
def data(run_dir) -> dict:
    return load(run_dir)


def _events(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines() if line.strip()]


def _copy(run_dir: Path, tmp_path: Path) -> Path:
    out = tmp_path / "copy"
    shutil.copytree(run_dir, out)
    return out


def _page_data(html: str) -> dict:
    m = re.search(r'<script type="application/json" id="sg-data">(.*?)</script>', html, re.S)
    assert m, "no embedded data"
    return json.loads(m.group(1))


# ---------------------------------------------------------------------------------- data vs files
def test_items_and_votes_match_events_jsonl(run_dir, data):
    events = _events(run_dir)
    actions = [e for e in events if e["kind"] in ("POST", "COM", "DM")]
    items = data["items"]
    assert items["n"] == len(actions)
    kinds = [items["kinds"][k] for k in decode(items["kind"])]
    author = [data["agents"][i] for i in decode(items["author"])]
    topics = [data["topics"][k] for k in decode(items["topic"])]
    assert decode(items["id"]).tolist() == [e["id"] for e in actions]
    assert decode(items["round"]).tolist() == [e["round"] for e in actions]
    assert kinds == [e["kind"] for e in actions]
    assert author == [e["sender"] for e in actions]
    assert topics == [e["topic"] for e in actions]
    assert items["text"] == [e["text"] for e in actions]
    assert decode(items["sentiment"]).tolist() == [e["sentiment"] for e in actions]
    recipients = [data["agents"][i] if i >= 0 else None for i in decode(items["recipient"])]
    assert recipients == [e["recipient"] for e in actions]
    targets = [t if t >= 0 else None for t in decode(items["target"]).tolist()]
    assert targets == [e["target_id"] for e in actions]
    votes = [e for e in events if e["kind"] == "VOTE"]
    assert data["votes"]["n"] == len(votes)
    assert decode(data["votes"]["value"]).tolist() == [e["value"] for e in votes]
    assert decode(data["votes"]["item"]).tolist() == [e["id"] for e in votes]


def test_likes_are_the_plus_one_votes_so_far(run_dir, data):
    events = _events(run_dir)
    posts = [e for e in events if e["kind"] == "POST" and e["round"] == 3]
    assert posts
    checked = 0
    for post in posts:
        for upto in (2, 3, 4):
            up = sum(1 for e in events if e["kind"] == "VOTE" and e["id"] == post["id"] and e["value"] == 1
                     and e["round"] <= upto)
            down = sum(1 for e in events if e["kind"] == "VOTE" and e["id"] == post["id"] and e["value"] == -1
                       and e["round"] <= upto)
            assert likes_dislikes(data, post["id"], upto) == (up, down)
            checked += up + down
    assert checked > 0, "no vote on any round-3 post: the check would be empty"
    assert likes_dislikes(data, posts[0]["id"], 2) == (0, 0)      # votes come in the post's own round


def test_tie_matrices_and_tie_updates_are_exact(run_dir, data):
    for r in range(1, 5):
        W = sp.load_npz(run_dir / "ties" / f"round_{r:04d}.npz").tocsr()
        mine = tie_matrix(data, r)
        assert mine.dtype == np.float32 and mine.shape == W.shape
        assert (mine != W).nnz == 0
    ties = [e for e in _events(run_dir) if e["kind"] == "TIE"]
    t = data["tie_events"]
    assert t["n"] == len(ties) > 0
    for key in ("before", "after", "evidence"):
        assert decode(t[key]).tolist() == [e[key] for e in ties]
    assert [data["agents"][i] for i in decode(t["src"])] == [e["src"] for e in ties]
    assert [data["agents"][i] for i in decode(t["dst"])] == [e["dst"] for e in ties]


def test_rewards_counts_groups_and_layout(run_dir, data):
    with (run_dir / "rounds.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    n = len(data["agents"])
    cols = data["rewards"]["columns"]
    rewards = decode(data["rewards"]["values"]).reshape(data["T"], n, len(cols))
    counts = decode(data["counts"]["values"]).reshape(data["T"], n, len(data["counts"]["columns"]))
    for row in rows:
        r, i = int(row["round"]) - 1, data["agents"].index(row["agent"])
        for c, name in enumerate(cols):
            assert rewards[r, i, c] == float(row[name])
        assert counts[r, i, data["counts"]["columns"].index("POST")] == int(row["POST"])
        assert data["groups"][i] == row["group"]
    assert data["T"] == 4 and data["agents"] == [f"agent_{i}" for i in range(8)]
    assert data["groups"][:4] == [EVIL] * 4
    xs, ys = data["layout"]["x"], data["layout"]["y"]
    assert len(xs) == len(ys) == 8 and all(0 <= v <= 1000 for v in xs + ys)
    assert load(run_dir)["layout"] == data["layout"]               # a fixed seed: the same picture
    assert data["network"]["round"] == [1, 2, 3, 4]
    assert any("No transcripts.jsonl" in t for t in data["notices"])


# ---------------------------------------------------------------------------------- the page
def test_page_is_self_contained_and_escapes_file_texts(run_dir, tmp_path):
    out = _copy(run_dir, tmp_path)
    evil_post = {"round": 1, "kind": "POST", "sender": "agent_0", "recipient": None, "mentions": [], "id": 9999,
                 "target_id": None, "topic": "</script><b>x", "sentiment": 0.0, "text": "</script>" + EVIL + "&amp;"}
    with (out / "events.jsonl").open("a") as f:
        f.write(json.dumps(evil_post) + "\n")
    page = build_viewer(out)
    assert page == out / "viewer.html"
    html = page.read_text(encoding="utf-8")
    assert "Content-Security-Policy" in html and "default-src 'none'" in html
    assert not re.search(r"https?://", html), "the page must not reference any network resource"
    assert not re.search(r"<(link|img|iframe)\b", html) and "<script src" not in html
    assert EVIL not in html and "</script><b>" not in html          # escaped in the JSON and the title
    assert html.count("</script>") == 2                            # the data block and the code block
    back = _page_data(html)
    assert back["groups"][0] == EVIL                               # ... and read back intact
    assert back["items"]["text"][-1] == evil_post["text"]
    js = Path(sys.modules["socialgym.viewer"].__file__).with_name("viewer.js").read_text()
    assert not re.search(r"\.(innerHTML|outerHTML|insertAdjacentHTML)\b|document\.write", js)   # textContent only


def test_embed_json_round_trips_odd_text():
    value = {"t": "a</script>b<!--c-->&\u2028\u2029\"'", "nan": float("nan"), "inf": float("inf")}
    text = embed_json(value)
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text) == {"t": value["t"], "nan": None, "inf": None}


def test_build_viewer_out_argument(run_dir, tmp_path):
    target = build_viewer(run_dir, out=tmp_path / "x.html")
    assert target == tmp_path / "x.html" and target.stat().st_size > 0
    assert build_viewer(run_dir, out=tmp_path) == tmp_path / "viewer.html"


# ---------------------------------------------------------------------------------- transcripts
def test_transcripts_give_feed_plans_and_tips(run_dir, tmp_path):
    out = _copy(run_dir, tmp_path)
    system = {"role": "system", "content": "You are agent 0.\nBe nice."}
    plan_prompt = "Round 2.\nPosts you can comment on:\n- id 3 by agent_1 [music] (0 likes): hi\n- id 5 by agent_2 [x]: yo"
    lines = [
        {"agent": "agent_0", "round": 2, "purpose": "plan", "cached": False,
         "messages": [system, {"role": "user", "content": plan_prompt}], "reply": '{"actions": []}'},
        {"agent": "agent_0", "round": 2, "purpose": "coach", "cached": True,
         "messages": [system, {"role": "user", "content": "Tips please."}], "reply": '{"tips": ["a", "b", "c"]}'},
        {"agent": "agent_1", "round": 2, "purpose": "vote", "cached": False,
         "messages": [{"role": "system", "content": "You are agent 1."}, {"role": "user", "content": "- 3 agent_1: hi"}],
         "reply": '{"votes": {"3": 1}}'},
    ]
    (out / "transcripts.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines) + "{broken\n")
    d = load(out)
    tr = d["transcripts"]
    assert d["has_transcripts"] and len(tr["system"]) == 2
    plan = tr["entries"]["agent_0"][0]
    assert plan[:3] == [2, "plan", False] and plan[5] == '{"actions": []}'
    assert transcript_text(d, plan[4][0][1]) == plan_prompt
    assert transcript_text(d, tr["system"][plan[3]]) == system["content"]
    assert tr["entries"]["agent_0"][1][1] == "coach"
    assert any("transcripts.jsonl: 1 line could not be read" in t for t in d["notices"])
    assert not any("No transcripts.jsonl" in t for t in d["notices"])
    build_viewer(out)


# ---------------------------------------------------------------------------------- bad input
def test_not_a_run_gives_one_line_errors(tmp_path, run_dir):
    with pytest.raises(ViewerError, match="does not exist") as e1:
        build_viewer(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ViewerError, match="not a run directory") as e2:
        build_viewer(tmp_path / "empty")
    sweep = tmp_path / "sweep"
    (sweep / "runs" / "c00-x=1").mkdir(parents=True)
    shutil.copytree(run_dir, sweep / "runs" / "c00-x=1" / "rep_0")
    (sweep / "sweep.json").write_text("{}")
    with pytest.raises(ViewerError, match=r"a sweep: view its runs, e\.g\. socialgym view .*rep_0") as e3:
        build_viewer(sweep)
    for e in (e1, e2, e3):
        assert isinstance(e.value, ValueError) and "\n" not in str(e.value)
    assert not (sweep / "viewer.html").exists()


def test_a_run_too_large_for_one_page_is_refused(run_dir, monkeypatch):
    import socialgym.viewer.data as viewer_data

    monkeypatch.setattr(viewer_data, "MAX_PAGE_MB", 1e-6)
    with pytest.raises(ViewerError, match="too large for one viewer page") as e:
        load(run_dir)
    assert "\n" not in str(e.value)


def test_damaged_files_become_notices(run_dir, tmp_path):
    out = _copy(run_dir, tmp_path)
    with (out / "events.jsonl").open("a") as f:
        f.write("this is not json\n[1, 2]\n" + json.dumps({"kind": "POST", "round": 2}) + "\n" + '{"kind": "VO')
    (out / "ties" / "round_0004.npz").write_bytes(b"garbage")
    (out / "ties" / "round_0002.npz").unlink()
    (out / "summary.json").write_text("{not json")
    (out / "personas.json").write_text("[]")
    d = load(out)
    text = " | ".join(d["notices"])
    assert "events.jsonl: 4 lines could not be read" in text
    assert "Tie matrices that could not be read: rounds 4" in text
    assert "No tie matrix for 1 round: 2" in text
    assert "summary.json could not be read" in text
    assert d["T"] == 4 and sorted(d["ties"]["rounds"]) == ["1", "3"]
    assert d["items"]["n"] == sum(1 for e in _events(run_dir) if e["kind"] in ("POST", "COM", "DM"))
    build_viewer(out)


def test_killed_run_builds_with_a_notice(tmp_path):
    path = _write_config(tmp_path / "c.yaml", {**CONFIG, "env": {**CONFIG["env"], "n_agents": 6, "max_rounds": 5}})
    out = tmp_path / "killed"
    env = {**os.environ, "SOCIALGYM_KILL_AT": "3:act"}
    proc = subprocess.run([sys.executable, "-m", "socialgym.cli", "run", str(path), "--out", str(out), "--quiet"],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    page = build_viewer(out)
    d = _page_data(page.read_text(encoding="utf-8"))
    assert d["T"] == 2 and d["status"] == "running"
    assert any('did not finish: summary.json says status "running" after 2 of 5 rounds' in t for t in d["notices"])


def test_events_and_ties_not_logged(tmp_path):
    from socialgym.experiments import load_config, run_experiment

    cfg = {**CONFIG, "env": {**CONFIG["env"], "max_rounds": 2},
           "logging": {**CONFIG["logging"], "events": False, "ties": False}}
    out = tmp_path / "quiet"
    run_experiment(load_config(_write_config(tmp_path / "c.yaml", cfg)), out, progress=False)
    d = load(out)
    text = " | ".join(d["notices"])
    assert "No events.jsonl (logging.events: false)" in text
    assert "No tie matrices (ties/round_*.npz) (logging.ties: false)" in text
    assert d["T"] == 2 and d["items"]["n"] == 0 and not d["has_events"]
    build_viewer(out)


# ---------------------------------------------------------------------------------- discussions
def test_moderation_run(tmp_path):
    from socialgym.experiments.studies.moderation import ModerationExperiment, plan_jobs, run_one

    cfg = ModerationExperiment(no_llm=True, discussions=2, strategies=("no_moderator", "no_instructions"))
    jobs, pool = plan_jobs(cfg)
    records = [run_one(job, cfg, pool, None) for job in jobs]
    out = tmp_path / "moderation"
    out.mkdir()
    (out / "discussions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records) + '{"key": "cut sh')
    d = load(out)
    assert d["kind"] == "discussion" and d["strategies"] == ["no_moderator", "no_instructions"]
    assert len(d["discussions"]) == len(records)
    assert any("1 line could not be read" in t for t in d["notices"])
    banned = [(r["key"], t["turn"], u) for r in records for t in r["turns"] for u in t["banned"]]
    assert banned, "the scripted moderator bans the troll in this seed"
    mine = [(r["key"], t["turn"], u) for r in d["discussions"] for t in r["turns"] for u in t["banned"]]
    assert mine == banned
    first = d["discussions"][0]["turns"][0]
    assert first["toxicity"] == records[0]["turns"][0]["toxicity"]
    html = build_viewer(out).read_text(encoding="utf-8")
    assert 'id="strategy"' in html and 'id="discussion"' in html and 'id="d-thread"' in html


# ---------------------------------------------------------------------------------- pyFloat (node)
def test_js_float_format_matches_python_repr():
    node = need_node()
    js = (Path(sys.modules["socialgym.viewer"].__file__).with_name("viewer.js")).read_text()
    body = re.search(r"(  function pyFloat\(x\) \{.*?\n  \})", js, re.S).group(1)
    rng = np.random.default_rng(0)
    values = np.concatenate([rng.random(200), rng.random(50) * 1e-5, [0.0, 1.0, 0.25, 1e-7, 5e-5, 0.1, 1e16, 123.0]])
    f32 = [float(np.float32(v)) for v in values] + [float(v) for v in values]
    script = body + "\nconsole.log(JSON.stringify(" + json.dumps(f32) + ".map(pyFloat)));"
    out = subprocess.run([node, "-e", script], capture_output=True, text=True, timeout=60, check=True).stdout
    assert json.loads(out) == [repr(v) for v in f32]


@pytest.mark.slow
def test_cli_view_and_serve_on_loopback(run_dir, tmp_path):
    """`socialgym view DIR` writes the page and prints its path; `--serve` serves it on 127.0.0.1;
    a sweep root or a missing directory is one line and exit status 2."""
    import urllib.request

    root = Path(__file__).resolve().parents[1]
    work = tmp_path / "run"
    shutil.copytree(run_dir, work)
    done = subprocess.run([sys.executable, "-m", "socialgym.cli", "view", str(work)], capture_output=True,
                          text=True, cwd=root, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == f"viewer: {(work / 'viewer.html').resolve()}"
    missing = subprocess.run([sys.executable, "-m", "socialgym.cli", "view", str(tmp_path / "nothing")],
                             capture_output=True, text=True, cwd=root, timeout=120)
    assert missing.returncode == 2 and len(missing.stderr.strip().splitlines()) == 1
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    # Ctrl-C must reach the server even if this process ignores SIGINT (an ignored signal is inherited)
    proc = subprocess.Popen([sys.executable, "-m", "socialgym.cli", "view", str(work), "--serve"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=root, env=env,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        lines = [proc.stdout.readline(), proc.stdout.readline()]
        url = re.search(r"serving (http://127\.0\.0\.1:\d+/viewer\.html)", lines[1]).group(1)
        with urllib.request.urlopen(url, timeout=10) as reply:
            assert reply.read() == (work / "viewer.html").read_bytes()
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(20)
