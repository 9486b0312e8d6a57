"""The PPO baseline (training: socialgym/training/ppo.py; runtime: torch_policy.py): GAE by hand,
masks, the update's direction, training artefacts, TorchPolicy in mixed runs (PolicyMix, the
experiment runner), the CLI and evaluation."""

from __future__ import annotations

import csv
import os
import pickle

import numpy as np
import pytest
from capabilities import need_module, not_applicable

torch = need_module("torch")

import socialgym  # noqa: E402
from socialgym.agents import PolicyMix  # noqa: E402
from socialgym.baselines import GreedyPolicy, RandomPolicy  # noqa: E402
from socialgym.training import ppo  # noqa: E402
from socialgym.training.torch_policy import (Actor, ActorCritic, Heads, RunningNorm, TorchPolicy,  # noqa: E402
                                              evaluate_actions, feature_size)
from socialgym.experiments.analysis.evaluate import evaluate, learning_curve, write_table  # noqa: E402

SMALL = dict(n_agents=6, n_actions=2, max_rounds=3, feed_size=4, vote_feed_size=4, dm_inbox_size=3)


def test_gae_by_hand():
    # one agent, rewards 0, 1, 2; values 0.5 each; gamma = lambda = 0.5
    # t=2: delta = 2 - 0.5 = 1.5                      A2 = 1.5
    # t=1: delta = 1 + 0.5*0.5 - 0.5 = 0.75           A1 = 0.75 + 0.25*1.5 = 1.125
    # t=0: delta = 0 + 0.25 - 0.5 = -0.25             A0 = -0.25 + 0.25*1.125 = 0.03125
    adv, ret = ppo.gae(torch.tensor([[0.0], [1.0], [2.0]]), torch.full((3, 1), 0.5), 0.5, 0.5)
    assert adv[:, 0].tolist() == pytest.approx([0.03125, 1.125, 1.5])
    assert ret[:, 0].tolist() == pytest.approx([0.53125, 1.625, 2.0])


def test_masks_padding_and_empty_components():
    heads = Heads(np.array([2, 3, 1]), act_length=2)
    m1 = (np.array([1, 0], np.int8), np.array([0, 0, 0], np.int8), np.array([1], np.int8))
    m2 = (np.array([1, 1], np.int8), np.array([0, 1, 1], np.int8), np.array([1], np.int8))
    out = heads.masks([m1, m2, m1])
    assert out.shape == (3, 3, 3)
    assert out[0].tolist() == [[True, False, False], [True, False, False], [True, False, False]]
    assert out[1].tolist() == [[True, True, False], [False, True, True], [True, False, False]]
    assert (out[2] == out[0]).all()
    assert heads.phase_weight.tolist() == [[1, 1, 0], [0, 0, 1]]


def test_update_moves_probability_towards_advantage():
    """One PPO update on a batch where action 1 of a single 2-way head has positive advantage
    and action 0 negative: the policy's probability of action 1 rises."""
    torch.manual_seed(0)
    heads = Heads(np.array([2]), act_length=1)
    net = ActorCritic(3, heads.K, heads.M, 16)
    x = torch.ones(64, 3)
    mask = torch.ones(64, 1, 2, dtype=torch.bool)
    actions = torch.tensor([[0], [1]] * 32)
    w = torch.ones(64, 1)
    with torch.no_grad():
        _, logp, _, _ = evaluate_actions(net, x, mask, w, actions)
        before = net(x[:1], mask[:1])[0].exp()[0, 0, 1].item()
    batch = {"x": x, "mask": mask, "phase": torch.zeros(64, dtype=torch.long), "actions": actions,
             "logp": logp, "adv": torch.where(actions[:, 0] == 1, 1.0, -1.0), "ret": torch.zeros(64)}
    args = ppo.Args(epochs=4, minibatch=32, learning_rate=1e-2, entropy_coef=0.0)
    stats = ppo.ppo_update(net, torch.optim.Adam(net.parameters(), lr=1e-2), batch, heads, args,
                           torch.Generator().manual_seed(0))
    after = net(x[:1], mask[:1])[0].exp()[0, 0, 1].item()
    assert after > before + 0.05
    assert set(stats) == {"policy_loss", "value_loss", "entropy", "approx_kl"}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("ppo")
    args = ppo.Args(**SMALL, iterations=2, num_envs=2, minibatch=64, eval_every=1, eval_episodes=2, out=str(out),
                    seed=3)
    result = ppo.train(args, progress=False)
    return out, args, result


def test_training_writes_model_log_and_args(trained):
    out, args, result = trained
    rows = list(csv.DictReader(open(out / "train_log.csv")))
    assert [int(r["iteration"]) for r in rows] == [1, 2]
    # decisions per iteration: episodes * agents * 2 decisions per round * rounds
    assert int(rows[0]["decisions"]) == 2 * 6 * 2 * 3
    assert {"return_mean", "SOC_mean", "EMO_mean", "eval_return", "learning_rate", "entropy", "approx_kl"} <= set(rows[0])
    # the step size decays linearly to 0: Args' 2e-3 at iteration 1, half of it at iteration 2 of 2
    assert [float(r["learning_rate"]) for r in rows] == pytest.approx([2e-3, 1e-3])
    assert (out / "model.pt").is_file() and (out / "args.json").is_file()
    assert np.isfinite([float(r["return_mean"]) for r in rows]).all()
    assert np.isfinite([float(r["eval_return"]) for r in rows]).all()          # eval_every=1


def test_torch_policy_mixes_with_scripted_agents(trained):
    out, args, _ = trained
    policy = TorchPolicy.load(out / "model.pt", seed=1)
    env = socialgym.parallel_env(**ppo.env_kwargs(args) | {"obs_format": "both", "invalid_actions": "strict"}, seed=4)
    policy.check_env(env)
    mix = PolicyMix({policy: env.possible_agents[:3], GreedyPolicy(seed=0): env.possible_agents[3:]})
    obs, _ = env.reset(seed=4)
    steps = 0
    while env.agents:                                  # strict mode: any invalid action would raise
        obs, rewards, *_ = env.step(mix.act(obs))
        steps += 1
    assert steps == 2 * args.max_rounds
    # pickles (run checkpoints) and resumes the same random stream
    clone = pickle.loads(pickle.dumps(policy))
    obs, _ = env.reset(seed=5)
    mine = {a: obs[a] for a in env.possible_agents[:3]}
    a1, a2 = policy.act(mine), clone.act(mine)
    assert all((a1[k] == a2[k]).all() for k in a1)


def test_layout_mismatch_and_bad_inputs(trained, tmp_path):
    out, args, _ = trained
    policy = TorchPolicy.load(out / "model.pt")
    other = socialgym.parallel_env(**(ppo.env_kwargs(args) | {"feed_size": 5}))
    with pytest.raises(ValueError, match=r"trained on another layout.*feed_size.*\(4, 5\)"):
        policy.check_env(other)
    structured = socialgym.parallel_env(**(ppo.env_kwargs(args) | {"obs_format": "structured"}), seed=0)
    obs, _ = structured.reset(seed=0)
    with pytest.raises(ValueError, match="needs numeric observations"):
        policy.act(obs)
    with pytest.raises(FileNotFoundError):
        TorchPolicy.load(tmp_path / "missing.pt")
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="junk.pt is not a socialgym PPO model file"):
        TorchPolicy.load(tmp_path / "junk.pt")
    torch.save({"format": "other"}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match="other.pt is not a socialgym PPO model file"):
        TorchPolicy.load(tmp_path / "other.pt")


class _RunsCode:
    """What a hostile model file holds: unpickling it calls a function of the attacker's choice."""

    def __reduce__(self):
        return (os.makedirs, (str(MARKER),))


MARKER = None


@pytest.mark.parametrize("entry", ["policy", "evaluate"])
def test_a_model_file_from_someone_else_runs_no_code(entry, tmp_path):
    """Reported: a `kind: torch` path and `evaluate --model` used torch.load(weights_only=False)."""
    global MARKER
    MARKER = tmp_path / "code-ran"
    torch.save({"format": "socialgym-ppo-2", "args": _RunsCode()}, tmp_path / "model.pt")
    if entry == "policy":
        with pytest.raises(ValueError, match="not a socialgym PPO model file.*weights_only=True"):
            TorchPolicy.load(tmp_path / "model.pt")
    else:
        from socialgym.experiments.analysis import evaluate
        with pytest.raises(SystemExit) as exc:
            evaluate.main(["--model", str(tmp_path / "model.pt"), "--out", str(tmp_path / "eval")])
        assert exc.value.code == 2
    assert not MARKER.exists()


def test_experiment_runner_takes_a_torch_group(trained, tmp_path):
    from socialgym.experiments import RunError, load_config, run_experiment

    out, args, _ = trained
    env = {k: v for k, v in ppo.env_kwargs(args).items() if k != "obs_format"}
    cfg = load_config({"seed": 1, "env": env,
                       "policy": {"groups": [{"name": "ppo", "kind": "torch", "agents": 3,
                                              "params": {"path": str(out / "model.pt")}},
                                             {"name": "greedy", "kind": "greedy", "agents": 3}]},
                       "logging": {"report": False}})
    summary = run_experiment(cfg, tmp_path / "run", progress=False)
    assert summary["status"] == "complete" and summary["rounds_completed"] == args.max_rounds
    bad = load_config({"seed": 1, "env": {**env, "n_agents": 8, "feed_size": 5},
                       "policy": {"groups": [{"name": "ppo", "kind": "torch", "agents": 4,
                                              "params": {"path": str(out / "model.pt")}},
                                             {"name": "greedy", "kind": "greedy", "agents": 4}]},
                       "logging": {"report": False}})
    with pytest.raises(RunError, match="another layout"):
        run_experiment(bad, tmp_path / "bad", progress=False)


def test_cli_args_from_the_dataclass():
    args = ppo.parse_args(["--iterations", "7", "--wandb", "--task", "SOC", "--no-anneal-lr", "--n-agents", "5"])
    assert args.iterations == 7 and args.wandb is True and args.task == "SOC"
    assert args.anneal_lr is False and args.normalize_obs is True and args.n_agents == 5 and args.max_rounds is None
    assert ppo.env_kwargs(args)["n_agents"] == 5 and ppo.env_kwargs(args)["max_rounds"] == 10
    for bad in (["--task", "FUN"], ["--team-spirit", "1.5"], ["--num-envs", "0"]):
        with pytest.raises(SystemExit):
            ppo.parse_args(bad)
    docs = ppo.field_docs()
    assert set(docs) == {f.name for f in __import__("dataclasses").fields(ppo.Args)}
    assert "Discount per decision" in docs["gamma"]


def test_evaluation_table_and_curve(trained, tmp_path):
    out, args, _ = trained
    task, sizes = ppo.task_of(args).id, ppo.size_overrides(args)
    rows = evaluate({"random": lambda: RandomPolicy(seed=0), "greedy": lambda: GreedyPolicy(seed=0),
                     "ppo": lambda: TorchPolicy.load(out / "model.pt")}, task, overrides=sizes, episodes=2,
                    seed=9)
    assert [r["policy"] for r in rows] == ["random", "greedy", "ppo"]
    for r in rows:
        assert np.isfinite([r["SOC"], r["INF"], r["PRE"], r["COORD"], r["EMO"], r["total"]]).all()
    # same seeds and lambdas for everyone: evaluating one policy twice gives the same numbers
    again = evaluate({"greedy": lambda: GreedyPolicy(seed=0)}, task, overrides=sizes, episodes=2, seed=9)
    assert again[0]["total"] == rows[1]["total"]
    write_table(rows, tmp_path)
    assert "| ppo |" in (tmp_path / "evaluation.md").read_text()
    learning_curve(out / "train_log.csv", tmp_path / "curve.png", {"greedy": rows[1]["total"]})
    assert (tmp_path / "curve.png").stat().st_size > 1000


@pytest.mark.slow
def test_wandb_logging_offline(tmp_path):
    need_module("wandb")
    out = tmp_path / "ppo"
    args = ppo.Args(n_agents=4, max_rounds=2, feed_size=3, vote_feed_size=3, dm_inbox_size=2, iterations=2,
                    num_envs=1, eval_every=0, out=str(out), wandb=True)
    ppo.train(args, progress=False)
    runs = list((out / "wandb").glob("offline-run-*"))
    assert len(runs) == 1
    assert list(runs[0].glob("*.wandb"))                      # the run's records were written offline


@pytest.mark.parametrize("content", ["format-only", "wrong-weights", "bad-nvec"])
def test_an_incomplete_model_file_is_a_clear_error(trained, tmp_path, content):
    """Probe: a model.pt with only its format tag gave KeyError: 'nvec'; one with other weights
    a multi-line RuntimeError from load_state_dict."""
    out, _, _ = trained
    data = torch.load(out / "model.pt", weights_only=True)
    if content == "format-only":
        data = {"format": "socialgym-ppo-2"}
    elif content == "wrong-weights":
        data["state_dict"] = {"w": torch.zeros(2)}
    else:
        data["env_nvec"] = ["x", "y"]
    torch.save(data, tmp_path / "model.pt")
    with pytest.raises(ValueError) as info:
        TorchPolicy.load(tmp_path / "model.pt")
    assert "model.pt" in str(info.value) and "\n" not in str(info.value)


# ---------------------------------------------------------------- peers, normaliser, team spirit
def test_peer_head_masks_and_recipients_by_hand():
    """Two agents (rows 0 and 2 of a population of 5) with a feed of 3 slots: the peer head's
    value j < 3 is the author of slot j, 3 a random other agent; the env's recipient index of
    agent i writing to agent a is (a - i - 1) mod 5."""
    import socialgym.envs.feed.encoding as enc

    lay = enc.ActionLayout(n_agents=5, n_actions=1, feed_size=3, dm_inbox_size=1, max_topics=4, vote_feed_size=2)
    heads = Heads.for_layout(lay, n_topics=2)
    k = 2                                                     # the recipient component of slot 0
    assert heads.peer_components == (k,) and heads.nvec[k] == 4 and heads.nvec[4] == 2   # topics: 2 of 4
    feed = np.zeros((2, 3, 10), np.float32)
    feed[0, :, 0] = [1, 1, 0]                                 # agent 0 sees authors 3 and 0 (itself), slot 2 empty
    feed[0, :, 1] = [3, 0, -1]
    feed[1, :, 0] = [1, 1, 1]                                 # agent 2 sees authors 4, 1, 1
    feed[1, :, 1] = [4, 1, 1]
    dm_on = tuple(np.ones(n, np.int8) for n in lay.nvec)      # every value allowed (an act phase with DMs)
    inert = tuple(np.ones(n, np.int8) if i != k else np.eye(1, n, 0, dtype=np.int8)[0]
                  for i, n in enumerate(lay.nvec))            # recipient: only the no-op 0
    masks, dm = heads.masks_and_dm([dm_on, dm_on], feed, np.array([0, 2]))
    assert masks[0, k, :4].tolist() == [True, False, False, True]      # own item and empty slot excluded
    assert masks[1, k, :4].tolist() == [True, True, True, True]
    assert dm.tolist() == [[True], [True]]
    masks, dm = heads.masks_and_dm([inert, dm_on], feed, np.array([0, 2]))
    assert masks[0, k, :4].tolist() == [False, False, False, True] and dm.tolist() == [[False], [True]]
    actions = np.zeros((2, heads.K), np.int64)
    actions[:, k] = [0, 1]                                    # agent 0 -> slot 0 (agent 3); agent 2 -> slot 1 (agent 1)
    me = np.array([0, 2])
    out = heads.to_env(actions, feed, np.array([[True], [True]]), me, 5, np.random.default_rng(0))
    assert out[:, k].tolist() == [(3 - 0 - 1) % 5, (1 - 2 - 1) % 5] == [2, 3]
    assert out[0, k] == 2 and out[1, k] == 3
    out = heads.to_env(actions, feed, np.array([[False], [True]]), me, 5, np.random.default_rng(0))
    assert out[0, k] == 0                                     # no DM possible: the no-op value
    actions[:, k] = 3                                         # a random other agent: every other one, never itself
    seen = set()
    for seed in range(40):
        value = heads.to_env(actions, feed, np.array([[True], [True]]), me, 5, np.random.default_rng(seed))[0, k]
        seen.add(int(value))
    assert seen == {0, 1, 2, 3}                               # (0 + 1 + v) mod 5 covers agents 1..4


def test_running_norm_merges_batches_like_one():
    rng = np.random.default_rng(0)
    a, b = rng.normal(2.0, 3.0, (50, 3)), rng.normal(-1.0, 0.5, (70, 3))
    norm = RunningNorm(3)
    norm.update(a)
    norm.update(b)
    both = np.concatenate([a, b])
    assert norm.mean == pytest.approx(both.mean(0), abs=1e-4)
    assert norm.var == pytest.approx(both.var(0), rel=1e-3)
    z = norm(both)
    assert z.dtype == np.float32 and np.abs(z).max() <= 5.0
    assert z.mean(0) == pytest.approx(np.zeros(3), abs=1e-3)


@pytest.mark.parametrize("spirit", [0.0, 0.5, 1.0])
def test_team_spirit_mixes_own_and_population_rewards(spirit):
    """The reward PPO learns from is (1 - s) * own + s * the population's mean; the logged
    returns stay the agents' own."""
    args = ppo.Args(**SMALL, num_envs=1, hidden=8, normalize_obs=False)
    env = ppo.make_vec_env(args, 1)
    heads = Heads.for_layout(env.layout, 8)
    net = ActorCritic(feature_size(4, 3, 4), heads.K, heads.M, 8)
    learned = ppo.rollout(env, [5], Actor(net, heads, None, seed=1), team_spirit=spirit)
    own = ppo.rollout(env, [5], Actor(net, heads, None, seed=1), team_spirit=0.0)
    r = own["reward"].numpy()                                  # [step, agent], the env's rewards
    assert r[1::2].sum() > 0 and (r[0::2] == 0).all()          # paid after vote steps only
    expected = (1 - spirit) * r + spirit * r.mean(1, keepdims=True)
    assert learned["reward"].numpy() == pytest.approx(expected, abs=1e-6)
    assert learned["returns"] == pytest.approx(own["returns"])


def test_a_policy_trained_at_six_agents_acts_at_nine(trained):
    """Peers are addressed by observation, so the network fits any population size: it plays a
    whole episode at 9 agents in strict mode (any invalid action would raise) through both APIs."""
    out, args, _ = trained
    policy = TorchPolicy.load(out / "model.pt", seed=2)
    env = socialgym.parallel_env(**(ppo.env_kwargs(args) | {"n_agents": 9, "obs_format": "both",
                                                            "invalid_actions": "strict"}), seed=1)
    policy.check_env(env)
    obs, _ = env.reset(seed=1)
    while env.agents:
        obs, *_ = env.step(policy.act(obs))
    recipients = set(env.unwrapped.content.column("recipient").tolist()) - {-1}
    assert len(recipients) >= 3 and max(recipients) > 5        # DMs reach agents a 6-agent index never named
    rows = evaluate({"ppo": lambda: TorchPolicy.load(out / "model.pt")}, ppo.task_of(args).id,
                    overrides=ppo.size_overrides(args) | {"n_agents": 9}, episodes=2, seed=3)
    assert np.isfinite(rows[0]["total"])


def test_device_cuda_without_cuda_is_a_clear_error(tmp_path):
    if torch.cuda.is_available():
        not_applicable("CUDA is available here (the test is of its absence)")
    with pytest.raises(ValueError, match="CUDA is not available"):
        ppo.train(ppo.Args(**SMALL, iterations=1, num_envs=1, device="cuda", out=str(tmp_path)), progress=False)


def test_evaluate_cli_plays_a_model_at_another_population_size(trained, tmp_path, capsys):
    from socialgym.experiments.analysis import evaluate as evaluate_module

    out, args, _ = trained
    rc = evaluate_module.main(["--model", str(out / "model.pt"), "--n-agents", "9", "--episodes", "2",
                               "--out", str(tmp_path)])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "socialgym/feed-mixed-v0 with" in printed and "'n_agents': 9" in printed
    rows = __import__("json").loads((tmp_path / "evaluation.json").read_text())
    assert [r["policy"] for r in rows] == ["random", "greedy", "ppo"] and len(rows[2]["returns"]) == 2
    with pytest.raises(SystemExit):
        evaluate_module.main(["--model", str(out / "model.pt"), "--task", "nonsense", "--out", str(tmp_path)])


def test_an_old_format_model_file_says_retrain(tmp_path):
    torch.save({"format": "socialgym-ppo-1", "state_dict": {}}, tmp_path / "model.pt")
    with pytest.raises(ValueError, match="older socialgym.*retrain"):
        TorchPolicy.load(tmp_path / "model.pt")
