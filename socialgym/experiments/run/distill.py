"""``socialgym distill``: a cheap policy behaviour-cloned from LLM runs, and how alike it acts.

1. The decision logs of the runs (``logging.decisions``) are split: the last ``holdout`` runs are
   held out, the rest train the network (``socialgym.training.distill``), written as a
   ``model.pt`` that ``TorchPolicy.load`` and a ``distilled`` policy group read.
2. On the held-out runs' decisions: how often the network's most likely choice is the logged one.
3. With ``report``: each held-out run is replayed — same config and seed, the logged agents'
   groups now ``distilled`` — and the fidelity lines compare those agents across the two runs
   (``socialgym.experiments.analysis.fidelity``); ``fidelity.md`` / ``fidelity.json`` are written.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Sequence

import numpy as np

from socialgym.experiments.define.schema import freeze
from socialgym.experiments.errors import RunError
from socialgym.rundir import layout
from socialgym.rundir.decisions import OBS_KEYS, interface_of, read_decisions
from socialgym.rundir.files import atomic_write, finite_json, write_json
from socialgym.rundir.runs import kind_of, read_run_info


def distill(runs: Sequence[str | Path], out: str | Path, *, holdout: int = 1, report: str | Path | None = None,
            args=None, progress: bool = False) -> dict:
    """Train on ``runs`` minus the last ``holdout``, write the model to ``out``, measure agreement
    on the held-out decisions and (with ``report``) replay the held-out runs. Returns the report."""
    from socialgym.training.distill import Args, agreement, behaviour_clone
    from socialgym.training.torch_policy import save_policy

    runs = [Path(r) for r in runs]
    for run in runs:
        if kind_of(run) != "run":
            raise RunError(f"{run} is not a run directory")
    seen: dict[object, Path] = {}
    for run in runs:
        info = read_run_info(run, {})
        run_id = info.get("run_id") if isinstance(info, dict) else None
        same = seen.setdefault(run.resolve(), run)
        if same is run and isinstance(run_id, str):
            same = seen.setdefault(run_id, run)
        if same is not run:
            raise RunError(f"{run} is given twice (also as {same}, the same run or a copy of it): a run can train "
                           "or be held out, once; "
                           "held-out agreement on a training run would measure memory, not fidelity")
    if not 0 <= holdout < len(runs):
        raise RunError(f"--holdout {holdout}: keep at least one of the {len(runs)} run(s) for training "
                       "(--holdout 0 holds none out: no agreement, no fidelity report)")
    args = args or Args()
    for name, low, high in (("seed", 0, 2**32 - 1), ("epochs", 1, None), ("hidden", 1, None)):
        value = getattr(args, name, None)
        if isinstance(value, bool) or not isinstance(value, int) or value < low or (high and value > high):
            raise RunError(f"distill: {name} must be an integer >= {low}{f' and <= {high}' if high else ''}, "
                           f"got {value!r}")
    stray = [p for run in runs for p in layout.stray_round_files(run) if p.parent.name == layout.DECISIONS]
    if stray:
        raise RunError(f"{stray[0]}: a decision file whose name is no round's (round_NNNN.npz); rename or remove it "
                       "so that what the network learns from is what the run logged")
    train_runs, held = runs[: len(runs) - holdout], runs[len(runs) - holdout:]
    try:
        train, unmapped = read_decisions(train_runs)
        test = read_decisions(held)[0] if held else {}
    except ValueError as exc:
        raise RunError(str(exc)) from None
    a, b = next(iter(train.values()), None), next(iter(test.values()), None)
    if a is not None and b is not None and (  # one per-agent layout across training and held-out runs
            interface_of(a.layout) != interface_of(b.layout)
            or any(a.obs[k].shape[1:] != b.obs[k].shape[1:] for k in OBS_KEYS)):
        raise RunError(f"the held-out runs' agents' layout {interface_of(b.layout)} differs from the training runs' "
                       f"{interface_of(a.layout)}: one network fits one layout")
    if not any(len(d) for d in train.values()):
        raise RunError(f"the decision logs of {', '.join(map(str, train_runs))} hold no decision to learn from")
    actor, stats = behaviour_clone(train, args)
    if not np.isfinite(stats["final_loss"]) or not all(bool(p.isfinite().all()) for p in actor.net.parameters()):
        raise RunError(f"training diverged (final loss {stats['final_loss']}; NaN or infinite weights): no model "
                       "written; try fewer --epochs or another --seed")
    first = next(d for d in train.values() if len(d))
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    save_policy(out, actor, first.layout, args)
    result = {"model": str(out), "train_runs": [str(r) for r in train_runs], "heldout_runs": [str(r) for r in held],
              "train_decisions": stats["decisions"], "final_loss": stats["final_loss"], "args": stats["args"],
              "unmapped": dict(unmapped), "agreement": agreement(actor, test) if test else {"fields": {}}}
    if report is not None:
        report = Path(report)
        result["replays"] = [replay(run, out, report / layout.REPLAYS / f"{i:02d}-{run.name}", progress)
                             for i, run in enumerate(held)]
        write_report(report, result)
    return result


def logged_agents(run: Path) -> list[int]:
    """The agents a run's decision logs cover."""
    decisions, _ = read_decisions([run])
    agents = sorted(set(np.concatenate([d.agent for d in decisions.values()] or [np.zeros(0, int)]).tolist()))
    if not agents:
        raise RunError(f"{run}: its decision logs hold no decision; nothing to replay")
    return agents


def replay(run: Path, model: Path, out: Path, progress: bool = False) -> dict:
    """Run ``run``'s config again with its seed, every group all of whose agents are logged
    played by the distilled ``model``; the fidelity lines of those agents. ``out`` and its folder
    must not be links: a replay is rebuilt (deleted first) only inside the report's own folders."""
    for path in (out.parent, out):
        if path.is_symlink():
            raise RunError(f"{path} is a link: a replay is rebuilt only in a folder of the report's own; "
                           "remove the link or give another --report")
    from socialgym.experiments.analysis.fidelity import fidelity
    from socialgym.experiments.define.loading import load_config
    from socialgym.experiments.run.runner import run_experiment

    cfg = load_config(run / layout.CONFIG)
    agents = logged_agents(run)
    info = read_run_info(run, {})
    seed = info.get("seed", cfg.seed) if isinstance(info, dict) else cfg.seed
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise RunError(f"{run / layout.RUN_INFO}: 'seed' must be an integer >= 0, got {seed!r}")
    wanted, start, groups, index = set(agents), 0, [], 0
    for g in cfg.policy_groups():
        mine = set(range(start, start + g.agents))
        start += g.agents
        original_index, index = index, index + (g.kind != "llm")
        if mine <= wanted:
            g = dataclasses.replace(g, kind="distilled", coach=False, params=freeze({"path": str(model)}))
        elif g.kind != "llm" and "seed" not in g.params:
            # the runner seeds a group by its place among the groups that are not llm: pin the
            # original seed, so that replacing groups does not reseed the others
            g = dataclasses.replace(g, params=freeze({**g.params, "seed": seed * 1000 + original_index}))
        groups.append(g)
    replaced = [i for i, g in enumerate(groups) if g.kind == "distilled"]
    if not replaced:
        raise RunError(f"{run}: no policy group has all its agents in the decision logs; nothing to replace")
    logging = dataclasses.replace(cfg.logging, decisions="all", report=False, wandb=None, progress=progress)
    env = dict(cfg.env)
    if "lambdas" not in env and not any(g.lambdas is not None for g in groups):
        lambdas = persona_lambdas(run)      # the original run's weights came from its personas
        if lambdas is not None:
            env["lambdas"] = lambdas
    cfg = dataclasses.replace(cfg, seed=seed, policy=dataclasses.replace(cfg.policy, groups=tuple(groups)),
                              logging=logging, env=freeze(env))
    if out.exists() and kind_of(out) == "run":
        import shutil
        shutil.rmtree(out)                 # a replay is derived data: rebuilt every time
    run_experiment(cfg, out, progress=progress)
    return {"run": str(run), "replay": str(out), "agents": len(agents),
            "lines": fidelity(run, out, agents)}


def persona_lambdas(run: Path) -> list | None:
    """The reward weights a run took from its personas (``personas.json``), agent by agent."""
    from socialgym.agents.persona import Persona, lambdas_matrix
    from socialgym.rundir import Run

    personas = Run(run).personas
    if not personas:
        return None
    order = sorted(personas, key=lambda a: int(str(a).rpartition("_")[2]))
    return lambdas_matrix([Persona(**personas[a]) for a in order]).tolist()


def write_report(folder: Path, result: dict) -> None:
    from socialgym.experiments.analysis.fidelity import fidelity_markdown

    folder.mkdir(parents=True, exist_ok=True)
    write_json(folder / layout.FIDELITY_JSON, finite_json(result), default=str)
    atomic_write(folder / layout.FIDELITY_MD, fidelity_markdown(result))


def summary_line(result: dict) -> str:
    a = result["agreement"].get("overall")
    share = f"{a['share']:.1%} of {a['decisions']} held-out decisions" if a else "no held-out runs"
    return f"wrote {result['model']}: agreement {share}"


def to_json(result: dict) -> str:
    return json.dumps(finite_json(result), default=str, indent=1)
