"""The run viewer (`socialgym view DIR`, issue 17) driven in a real headless browser.

Debian's ``chromium`` with ``chromium-driver`` through Selenium (benchmarks/_browser.py: the
driver's path is given, so nothing is downloaded at run time); skipped with the reason where no
browser can be driven (``make browser`` installs both). Pages are file:// URLs.

A feed run of LLM agents against the fake OpenAI-compatible server (agents' texts salted with
HTML, quotes and non-ASCII, so escaping is checked too; one agent's plans of one round are
unparsable, so it has fallbacks) and a ``socialgym moderation --no-llm`` run (its rule-based
moderator bans a troll) are made in-process; every check compares what the page shows with the
run's own files: ``events.jsonl``, ``ties/round_0003.npz``, ``rounds.csv``,
``transcripts.jsonl``, ``discussions.jsonl``. Each page must also log no script error, load
nothing but file:/data: URLs and run no agent's text as HTML. Screenshots go to the test's tmp dir and, when
``SOCIALGYM_ARTIFACTS`` is set, to that folder.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import random
import re
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from capabilities import browser_helper, need_browser, need_module

ROOT = Path(__file__).resolve().parents[1]
ROUND = 3
TOL = 1e-6
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
# salted into agents' texts by the fake server: the page must show them as text, never as markup
TRICKY = ("<b>bold?</b>", "a & b", "\"quoted\" it's", "café ✓ 🙂", "<script>window.__xss=1</script>",
          "<img src=x onerror=\"window.__xss=2\">")


_browser = browser_helper()          # benchmarks/_browser.py


# --------------------------------------------------------------------------- runs

N_AGENTS = 5                                  # 4 LLM agents (coached) and 1 greedy
FALLBACK_AGENT, FALLBACK_ROUND = "agent_1", 2


def _plan_of(body: dict) -> tuple[str | None, int | None]:
    """(agent, round) of a plan request, read from its prompt: the agent is the one missing from
    "Users you can interact with" (all the others, in so small a run), the round from "Round N."."""
    text = "\n".join(str(m.get("content")) for m in body.get("messages") or [] if m.get("role") == "user")
    users, rnd = re.search(r"Users you can interact with: ([^\n]*)", text), re.search(r"\bRound (\d+)\.", text)
    if not users or not rnd:
        return None, None
    listed = set(re.findall(r"agent_\d+", users.group(1)))
    span = re.fullmatch(r"agent_(\d+) to agent_(\d+)(?: except agent_(\d+))?", users.group(1).strip())
    if span:                       # numbered users come as a range ("agent_0 to agent_5 except agent_3")
        low, high, gap = int(span.group(1)), int(span.group(2)), span.group(3)
        listed = {f"agent_{k}" for k in range(low, high + 1) if gap is None or k != int(gap)}
    missing = [f"agent_{k}" for k in range(N_AGENTS) if f"agent_{k}" not in listed]
    return (missing[0] if len(missing) == 1 else None), int(rnd.group(1))


def _salted_responder(body: dict, n: int):
    """Deterministic schema-valid replies (the reply depends only on the request); each action's
    text gets one of TRICKY appended; FALLBACK_AGENT's plans in FALLBACK_ROUND get no JSON at all
    (every re-prompt too), so its actions there are fallbacks."""
    from socialgym.llm.testing import sample_schema, schema_of

    schema = schema_of(body)
    if not schema:
        return "ok"
    if "actions" in (schema.get("properties") or {}) and _plan_of(body) == (FALLBACK_AGENT, FALLBACK_ROUND):
        return "Sorry, I cannot answer in JSON today."
    digest = hashlib.sha256(json.dumps([body.get("messages"), schema], sort_keys=True).encode()).digest()
    rng = random.Random(digest)
    reply = sample_schema(schema, rng)
    if isinstance(reply, dict):
        for action in reply.get("actions") or []:
            if isinstance(action, dict) and isinstance(action.get("text"), str):
                action["text"] = f"{action['text']} {rng.choice(TRICKY)}"
    return json.dumps(reply)


def _read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="module")
def feed_run(tmp_path_factory):
    need_module("openai")
    from socialgym.experiments import load_config, run_experiment
    from socialgym.llm.testing import FakeServer

    out = tmp_path_factory.mktemp("viewer") / "feed"
    with FakeServer(_salted_responder) as server:
        data = {"seed": 1, "env": {"n_agents": N_AGENTS, "max_rounds": 4, "recommender": "random", "sentiment": "tone"},
                "policy": {"groups": [{"name": "llm", "kind": "llm", "agents": 4, "coach": True},
                                      {"name": "greedy", "kind": "greedy"}]},
                "llm": {"base_url": server.base_url, "model": "fake", "api_key": "sk-test", "max_concurrency": 4},
                "logging": {"report": False, "progress": False, "transcripts": True}}
        run_experiment(load_config(data), out)
    events = _read_jsonl(out / "events.jsonl")
    agents = json.loads((out / "summary.json").read_text())["agents"]
    # the run itself is what the checks need: a round 3 with posts, comments, DMs, votes and ties
    kinds = Counter(e["kind"] for e in events if e["round"] == ROUND)
    assert all(kinds[k] for k in ("POST", "COM", "DM", "VOTE")), kinds
    with open(out / "rounds.csv", newline="") as f:
        rounds = list(csv.DictReader(f))
    assert any(r["agent"] == FALLBACK_AGENT and r["round"] == str(FALLBACK_ROUND) and int(r["fallbacks"]) > 0
               for r in rounds), "the fake server's unparsable plans caused no fallback"
    return {"dir": out, "events": events, "agents": agents, "rounds": rounds,
            "personas": json.loads((out / "personas.json").read_text()),
            "transcripts": _read_jsonl(out / "transcripts.jsonl")}


@pytest.fixture(scope="module")
def discussion_run(tmp_path_factory):
    from socialgym.experiments.studies.moderation import ModerationExperiment, run_experiment

    out = tmp_path_factory.mktemp("viewer") / "moderation"
    cfg = ModerationExperiment(no_llm=True, strategies=("no_moderator", "moderation_guidelines"), discussions=1,
                               users=4, pool=8, max_turns=10, annotators=3)
    run_experiment(cfg, out, progress=False)
    records = _read_jsonl(out / "discussions.jsonl")
    banned = [r for r in records if r["bans"]]
    assert banned, "the scripted moderator banned nobody: the discussion check needs a ban"
    return {"dir": out, "records": records, "banned": banned[0]}


def _build(run_dir: Path) -> Path:
    from socialgym.viewer import build_viewer    # fails (not skips) when the viewer is missing

    page = build_viewer(run_dir)
    assert Path(page) == run_dir / "viewer.html" and Path(page).is_file()
    return Path(page)


# --------------------------------------------------------------------------- browser

@pytest.fixture(scope="module")
def driver():
    need_browser()
    with _browser.headless_chrome(1400, 1000) as d:
        yield d


@pytest.fixture
def shoot(driver, tmp_path):
    """shoot(name): a PNG of the window in tmp_path, copied to $SOCIALGYM_ARTIFACTS when set."""
    def take(name: str) -> Path:
        path = tmp_path / f"{name}.png"
        assert driver.save_screenshot(str(path)), path
        assert path.read_bytes()[:8] == PNG_MAGIC and path.stat().st_size > 5_000
        target = os.environ.get("SOCIALGYM_ARTIFACTS")
        if target:
            Path(target).mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, Path(target) / path.name)
        return path
    return take


def _open(driver, page: Path) -> None:
    driver.get_log("browser")                 # nothing logged before this page counts
    driver.get(page.as_uri())
    _wait(driver, "return document.readyState === 'complete'")


def _wait(driver, script: str, *args, timeout: float = 10):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout).until(lambda d: d.execute_script(script, *args))


def _page_is_clean(driver) -> None:
    """No script error, no request leaving the file system, no agent text run as markup."""
    errors = [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
    assert not errors, errors
    names = driver.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    assert all(n.startswith(("file:", "data:", "blob:")) for n in names), names
    assert driver.execute_script("return window.__xss === undefined"), "an agent's text ran as HTML"


# element -> plain data, in one round trip; ``own(el, sel)``: the first ``sel`` inside ``el`` that
# belongs to ``el`` itself, not to an item nested in it (a post's own text, not its comments')
_COLLECT = """
const ITEM = '.post, .comment, .dm, .agent-text, .vote, .d-comment';
const own = (el, sel) => [...el.querySelectorAll(sel)].find(x => x.closest(ITEM) === el);
const text = (el, sel) => { const x = own(el, sel); return x ? x.textContent : null; };
const shown = el => el.checkVisibility({checkOpacity: true, checkVisibilityCSS: true});
return [...document.querySelectorAll(arguments[0])].map(el => {
  const parent = el.parentElement ? el.parentElement.closest('.post') : null;
  return {attrs: Object.fromEntries([...el.attributes].map(a => [a.name, a.value])),
          classes: [...el.classList], visible: shown(el), all: el.textContent,
          text: text(el, '.text'), likes: text(el, '.likes'), dislikes: text(el, '.dislikes'),
          sentiment: text(el, '.sentiment'), toxicity: text(el, '.toxicity'),
          quality: text(el, '.argument-quality'),
          parent_post: parent ? parent.getAttribute('data-id') : null};
});
"""


def _items(driver, selector: str, *, visible_only: bool = True) -> list[dict]:
    rows = driver.execute_script(_COLLECT, selector)
    return [r for r in rows if r["visible"] or not visible_only]


def _set_value(driver, selector: str, value) -> None:
    """As a user dragging the control: the new value, then ``input`` and ``change``."""
    driver.execute_script("""
const el = document.querySelector(arguments[0]);
el.value = String(arguments[1]);
el.dispatchEvent(new Event('input', {bubbles: true}));
el.dispatchEvent(new Event('change', {bubbles: true}));""", selector, value)


def _number(text: str | None) -> float:
    m = re.search(r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?", text or "")
    assert m, f"no number in {text!r}"
    return float(m.group())


def _label_round(driver) -> int:
    label = driver.find_element("css selector", "#round-label").text
    numbers = [int(x) for x in re.findall(r"\d+", label)]
    assert numbers, label
    return numbers[0]


def _go_to_round(driver, t: int) -> None:
    _set_value(driver, "input#round", t)
    _wait(driver, "return document.querySelector('input#round').value === String(arguments[0])", t)
    assert _label_round(driver) == t


def _events(run: dict, kind: str, rnd: int | None = ROUND, sender: str | None = None) -> list[dict]:
    return [e for e in run["events"] if e["kind"] == kind and (rnd is None or e["round"] == rnd)
            and (sender is None or e["sender"] == sender)]


def _ties(run: dict, rnd: int = ROUND) -> np.ndarray:
    return sp.load_npz(run["dir"] / "ties" / f"round_{rnd:04d}.npz").toarray()


# --------------------------------------------------------------------------- feed run

@pytest.fixture(scope="module")
def feed_page(feed_run):
    return _build(feed_run["dir"])


def test_slider_and_arrow_keys_step_the_round(driver, feed_run, feed_page, shoot):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    _open(driver, feed_page)
    slider = driver.find_element("css selector", "input#round")
    assert slider.get_attribute("type") == "range"
    assert (slider.get_attribute("min"), slider.get_attribute("max")) == ("1", "4")
    _go_to_round(driver, 2)
    # the slider focused: one key press is one round (not two, were a page-wide handler added on top)
    driver.execute_script("arguments[0].focus()", slider)
    slider.send_keys(Keys.ARROW_RIGHT)
    assert slider.get_attribute("value") == "3" and _label_round(driver) == 3
    slider.send_keys(Keys.ARROW_LEFT)
    assert slider.get_attribute("value") == "2" and _label_round(driver) == 2
    # nothing focused: the arrow keys still step the round
    driver.execute_script("document.activeElement && document.activeElement.blur()")
    ActionChains(driver).send_keys(Keys.ARROW_RIGHT).perform()
    assert slider.get_attribute("value") == "3" and _label_round(driver) == 3
    ActionChains(driver).send_keys(Keys.ARROW_LEFT).perform()
    assert _label_round(driver) == 2
    _page_is_clean(driver)
    shoot("viewer_round2")


def _thread(by_id: dict, item: dict) -> list[int]:
    """The ids above a comment, nearest first, up to the post that starts its thread."""
    chain, seen = [], set()
    while item["kind"] == "COM" and item.get("target_id") in by_id and item["target_id"] not in seen:
        seen.add(item["target_id"])
        item = by_id[item["target_id"]]
        chain.append(item["id"])
    return chain


def test_round3_timeline_equals_the_events(driver, feed_run, feed_page, shoot):
    _open(driver, feed_page)
    _go_to_round(driver, ROUND)
    posts = _items(driver, "#timeline .post")
    comments = _items(driver, "#timeline .comment")
    by_id = {e["id"]: e for e in feed_run["events"] if e["kind"] in ("POST", "COM", "DM")}
    want_posts = {e["id"] for e in _events(feed_run, "POST")}
    want_comments = {e["id"] for e in _events(feed_run, "COM")}
    # besides round 3's own items, only the thread a round-3 comment answers may be shown (context)
    context = {i for c in want_comments for i in _thread(by_id, by_id[c])}

    shown_comments = {int(c["attrs"]["data-id"]): c for c in comments}
    shown_posts = {int(p["attrs"]["data-id"]): p for p in posts}
    assert len(shown_comments) == len(comments) and len(shown_posts) == len(posts), "an item shown twice"
    assert want_comments <= set(shown_comments), sorted(want_comments - set(shown_comments))
    assert want_posts <= set(shown_posts), sorted(want_posts - set(shown_posts))
    extra = (set(shown_comments) | set(shown_posts)) - want_comments - want_posts
    assert extra <= context, f"items of other rounds shown at round {ROUND}: {sorted(extra - context)}"

    for i, c in shown_comments.items():
        e = by_id[i]
        assert e["kind"] == "COM" and e["round"] <= ROUND, c
        assert (c["attrs"]["data-author"], c["text"].strip()) == (e["sender"], e["text"].strip()), c
        if c["parent_post"] is not None:          # threaded under the post that starts its thread
            assert int(c["parent_post"]) in _thread(by_id, e), (c, _thread(by_id, e))
    votes = _events(feed_run, "VOTE", rnd=None)
    for i, p in shown_posts.items():
        e = by_id[i]
        assert e["kind"] == "POST" and e["round"] <= ROUND, p
        assert (p["attrs"]["data-author"], p["attrs"]["data-topic"], p["text"].strip()) == \
            (e["sender"], e["topic"], e["text"].strip()), p
        # likes and dislikes as of round 3: the votes cast on it up to then
        up = sum(1 for v in votes if v["id"] == i and v["value"] > 0 and v["round"] <= ROUND)
        down = sum(1 for v in votes if v["id"] == i and v["value"] < 0 and v["round"] <= ROUND)
        assert (_number(p["likes"]), _number(p["dislikes"])) == (up, down), (p, up, down)
        assert p["sentiment"] is not None and p["sentiment"].strip(), p
    # the salted texts arrive as text (escaped), not as markup
    assert any(t in (p["text"] or "") for p in posts + comments for t in TRICKY)
    _page_is_clean(driver)
    shoot("viewer_round3_timeline")


def test_dms_hidden_until_toggled_then_equal_the_events(driver, feed_run, feed_page, shoot):
    _open(driver, feed_page)
    _go_to_round(driver, ROUND)
    toggle = driver.find_element("css selector", "input#dm-toggle")
    if toggle.is_selected():
        toggle.click()
    assert not _items(driver, "#dms .dm"), "DMs shown with the toggle off"
    toggle.click()
    assert toggle.is_selected()
    dms = {int(d["attrs"]["data-id"]): d for d in _items(driver, "#dms .dm")}
    want = {e["id"]: e for e in _events(feed_run, "DM")}
    assert sorted(dms) == sorted(want)
    for i, d in dms.items():
        e = want[i]
        assert (d["attrs"]["data-author"], d["attrs"]["data-recipient"], d["text"].strip()) == \
            (e["sender"], e["recipient"], e["text"].strip()), d
    _page_is_clean(driver)
    shoot("viewer_round3_dms")
    toggle.click()
    assert not _items(driver, "#dms .dm")


def _round3_agent(run: dict) -> str:
    """An LLM agent that wrote and voted in round 3 (the one with most round-3 events)."""
    acted = Counter(e["sender"] for e in run["events"] if e["round"] == ROUND and e["kind"] in ("POST", "COM"))
    voted = {e["sender"] for e in _events(run, "VOTE")}
    texts = {e["sender"] for e in run["events"] if e["kind"] in ("POST", "COM") and e["text"]}
    candidates = [a for a in acted if a in voted and a in texts]
    assert candidates, "no agent both wrote and voted in round 3"
    return max(candidates, key=lambda a: (acted[a], -run["agents"].index(a)))


def _top_k_matches(shown: list[tuple[str, float]], weights: np.ndarray, agents: list[str], me: str) -> None:
    """``shown`` (peer, w) are the strongest entries of ``weights`` (peers indexed like ``agents``)."""
    nonzero = {agents[j]: float(weights[j]) for j in np.flatnonzero(weights) if agents[j] != me}
    if nonzero:
        assert shown, f"no tie shown; the matrix has {nonzero}"
    peers = [p for p, _ in shown]
    assert len(peers) == len(set(peers)), shown
    for peer, w in shown:
        assert peer in nonzero, (peer, w, nonzero)
        assert abs(w - nonzero[peer]) <= TOL, (peer, w, nonzero[peer])
    if shown:
        weakest = min(w for _, w in shown)
        left_out = [w for p, w in nonzero.items() if p not in peers]
        assert all(w <= weakest + TOL for w in left_out), (shown, nonzero)


def test_agent_page_shows_its_texts_votes_and_round3_ties(driver, feed_run, feed_page, shoot):
    from socialgym.config import REWARD_NAMES

    agent = _round3_agent(feed_run)
    agents = feed_run["agents"]
    i = agents.index(agent)
    _open(driver, feed_page)
    _go_to_round(driver, ROUND)
    link = driver.find_element("css selector", f"#agents .agent-link[data-agent='{agent}']")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", link)
    link.click()
    _wait(driver, "const p = document.querySelector('#agent-page');"
                  "return p && p.getAttribute('data-agent') === arguments[0] && p.checkVisibility()", agent)
    page = "#agent-page"

    persona = driver.find_element("css selector", f"{page} .persona").text
    assert feed_run["personas"][agent]["name"] in persona, persona
    charts = {c["attrs"]["data-component"] for c in _items(driver, f"{page} .reward-chart", visible_only=False)}
    assert set(REWARD_NAMES) <= charts, charts

    # texts: every one shown is one of its events; round 3's are all there
    mine = {e["id"]: e for e in feed_run["events"] if e.get("sender") == agent and e["kind"] in ("POST", "COM", "DM")}
    texts = _items(driver, f"{page} .agent-text", visible_only=False)
    for t in texts:
        e = mine.get(int(t["attrs"]["data-id"]))
        assert e is not None, t
        assert (int(t["attrs"]["data-round"]), t["attrs"]["data-kind"], t["text"].strip()) == \
            (e["round"], e["kind"], e["text"].strip()), t
    assert sorted(int(t["attrs"]["data-id"]) for t in texts if t["attrs"]["data-round"] == str(ROUND)) == \
        sorted(i_ for i_, e in mine.items() if e["round"] == ROUND)

    # votes: item and value of its VOTE events
    votes = _items(driver, f"{page} .vote", visible_only=False)
    shown_votes = Counter((int(v["attrs"]["data-round"]), int(v["attrs"]["data-item"]), int(v["attrs"]["data-value"]))
                          for v in votes)
    all_votes = Counter((e["round"], e["id"], e["value"]) for e in _events(feed_run, "VOTE", rnd=None, sender=agent))
    assert not shown_votes - all_votes, shown_votes - all_votes
    assert {k: n for k, n in shown_votes.items() if k[0] == ROUND} == \
        {k: n for k, n in all_votes.items() if k[0] == ROUND}

    # ties at round 3: row i (out) and column i (in) of ties/round_0003.npz
    W = _ties(feed_run)
    outs = [(t["attrs"]["data-peer"], float(t["attrs"]["data-w"])) for t in _items(driver, f"{page} .tie-out",
                                                                                   visible_only=False)]
    ins = [(t["attrs"]["data-peer"], float(t["attrs"]["data-w"])) for t in _items(driver, f"{page} .tie-in",
                                                                                  visible_only=False)]
    _top_k_matches(outs, W[i], agents, agent)
    _top_k_matches(ins, W[:, i], agents, agent)
    assert outs or ins

    # coach tips and plans (transcripts.jsonl): each tip shown is one the coach gave this agent
    tips = set()
    for r in feed_run["transcripts"]:
        if r["agent"] == agent and r["purpose"] == "coach":
            try:
                tips.update(t.strip() for t in json.loads(r["reply"]).get("tips", []))
            except (ValueError, AttributeError):
                pass
    shown_tips = _items(driver, f"{page} .coach-tip", visible_only=False)
    assert shown_tips, "no coach tip on a coached agent's page"
    for tip in shown_tips:
        assert any(t and t in tip["all"] for t in tips), (tip["all"], tips)
    assert _items(driver, f"{page} .plan", visible_only=False), "no plan on an LLM agent's page"
    _page_is_clean(driver)
    shoot("viewer_round3_agent")

    driver.find_element("css selector", "#close-agent").click()
    _wait(driver, "const p = document.querySelector('#agent-page'); return !p || !p.checkVisibility()")


def test_graph_node_opens_agent_and_theta_filters_edges(driver, feed_run, feed_page, shoot):
    agents = feed_run["agents"]
    _open(driver, feed_page)
    _go_to_round(driver, ROUND)
    W = _ties(feed_run)
    Wud = (W + W.T) / 2                        # the undirected weight of the network metrics

    theta = driver.find_element("css selector", "input#theta")
    lo, hi = float(theta.get_attribute("min") or 0), float(theta.get_attribute("max") or 1)
    counts = {}
    for value in (lo, (lo + hi) / 2, hi):
        _set_value(driver, "input#theta", value)
        edges = _items(driver, "svg#graph line.edge")
        for e in edges:
            s, d = agents.index(e["attrs"]["data-src"]), agents.index(e["attrs"]["data-dst"])
            w = float(e["attrs"]["data-w"])
            assert abs(w - Wud[s, d]) <= TOL or abs(w - W[s, d]) <= TOL, (e["attrs"], W[s, d], Wud[s, d])
        counts[value] = len(edges)
    assert counts[lo] > 0, counts
    assert counts[hi] < counts[lo], f"theta changed nothing: {counts}"
    assert counts[lo] >= counts[(lo + hi) / 2] >= counts[hi], counts
    metrics = driver.find_element("css selector", "#graph-metrics").text
    assert metrics.strip()
    _set_value(driver, "input#theta", lo)

    # clicking a node opens that agent
    target = agents[-1]
    node = driver.find_element("css selector", f"svg#graph circle[data-agent='{target}']")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", node)
    node.click()
    _wait(driver, "const p = document.querySelector('#agent-page');"
                  "return p && p.getAttribute('data-agent') === arguments[0] && p.checkVisibility()", target)
    _page_is_clean(driver)
    shoot("viewer_round3_graph")


def _per_round(items: list[dict]) -> dict[int, int]:
    """{round: count} of .fallback / .invalid elements (data-round and data-count, else their text)."""
    out: dict[int, int] = {}
    for it in items:
        a = it["attrs"]
        if "data-round" in a and "data-count" in a:
            rnd, n = int(a["data-round"]), int(a["data-count"])
        else:
            m = re.search(r"round (\d+)\D+(\d+)", it["all"])
            assert m, it
            rnd, n = int(m.group(1)), int(m.group(2))
        out[rnd] = out.get(rnd, 0) + n
    return out


def test_agent_pages_list_fallbacks_and_invalid_actions(driver, feed_run, feed_page):
    _open(driver, feed_page)
    _go_to_round(driver, ROUND)
    for agent in feed_run["agents"]:
        link = driver.find_element("css selector", f"#agents .agent-link[data-agent='{agent}']")
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", link)
        link.click()
        _wait(driver, "const p = document.querySelector('#agent-page');"
                      "return p && p.getAttribute('data-agent') === arguments[0] && p.checkVisibility()", agent)
        for column, selector in (("fallbacks", ".fallback"), ("invalid", ".invalid")):
            want = {int(r["round"]): int(r[column]) for r in feed_run["rounds"]
                    if r["agent"] == agent and int(r[column]) > 0}
            assert _per_round(_items(driver, f"#agent-page {selector}", visible_only=False)) == want, (agent, column)
    _page_is_clean(driver)


def test_partial_run_page_says_what_is_missing(driver, feed_run, tmp_path, shoot):
    broken = tmp_path / "killed"
    shutil.copytree(feed_run["dir"], broken)
    (broken / "transcripts.jsonl").unlink()
    (broken / "ties" / "round_0004.npz").unlink()
    (broken / "viewer.html").unlink(missing_ok=True)
    page = _build(broken)
    _open(driver, page)
    notices = driver.find_element("css selector", "#notices")
    assert notices.is_displayed() and "transcripts" in notices.text, notices.text
    _go_to_round(driver, ROUND)                # the rest still replays
    assert _items(driver, "#timeline .post")
    _page_is_clean(driver)
    shoot("viewer_partial_run")


# --------------------------------------------------------------------------- discussion run

def _select(driver, selector: str, value: str, label: str | None = None) -> None:
    from selenium.webdriver.support.ui import Select

    box = Select(driver.find_element("css selector", selector))
    values = [o.get_attribute("value") for o in box.options]
    if value in values:
        box.select_by_value(value)
    else:
        texts = [o.text for o in box.options]
        match = [k for k, t in enumerate(texts) if value in t or (label and label in t)]
        assert match, f"{selector}: no option for {value!r} / {label!r} in {values} {texts}"
        box.select_by_index(match[0])


def test_discussion_run_marks_the_banned_user(driver, discussion_run, shoot):
    from socialgym.discussion import MODERATOR, STRATEGY_LABELS

    record = discussion_run["banned"]
    banned = [u for row in record["turns"] for u in row["banned"]]
    names = {u: record["users"].get(u, u) for u in banned}
    page = _build(discussion_run["dir"])
    _open(driver, page)
    assert driver.find_element("css selector", "#discussions").is_displayed()
    _select(driver, "select#strategy", record["strategy"], STRATEGY_LABELS.get(record["strategy"]))
    _select(driver, "select#discussion", str(record["index"]))

    # the user comments, turn by turn, with the annotators' mean scores
    shown = _items(driver, "#discussions .d-comment")
    users = [c for c in shown if "moderator" not in c["classes"]]
    want = [t for t in record["turns"] if t["agent"] != MODERATOR and t["text"]]
    assert [(int(c["attrs"]["data-turn"]), c["text"].strip()) for c in users] == \
        [(t["turn"], t["text"].strip()) for t in want]
    for c, t in zip(users, want):
        assert c["attrs"]["data-user"] in (t["agent"], t["username"]), (c["attrs"], t["agent"], t["username"])
        if t.get("toxicity") is not None:
            assert abs(_number(c["toxicity"]) - t["toxicity"]) <= 0.051, (c["toxicity"], t["toxicity"])
            assert abs(_number(c["quality"]) - t["argument_quality"]) <= 0.051, (c["quality"], t)
    moderator_turns = [c for c in shown if "moderator" in c["classes"]]
    assert moderator_turns, "no moderator turn marked"
    warned = {u for t in record["turns"] for u in t["warned"]}
    if warned:
        assert _items(driver, "#discussions .warning"), "a warning in the record, none marked"

    # a visible "banned" badge that names the banned user
    badges = _items(driver, "#discussions .banned")
    assert badges, "no visible .banned element"
    named = [b for b in badges if "banned" in b["all"].lower() and
             any(n in b["all"] or u in b["all"] for u, n in names.items())]
    if not named:                              # the badge may sit on the banned user's comment
        named = driver.execute_script("""
return [...document.querySelectorAll('#discussions .banned')].filter(b => b.checkVisibility() &&
  b.textContent.toLowerCase().includes('banned')).map(b => {
    const c = b.closest('[data-user]'); return c ? c.getAttribute('data-user') : null; })""")
        named = [u for u in named if u in names or u in names.values()]
    assert named, (badges, names)
    _page_is_clean(driver)
    shoot("viewer_discussion_banned")
