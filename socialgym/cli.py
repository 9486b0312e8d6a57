"""The ``socialgym`` command.

    socialgym run CONFIG --out DIR [--set key.path=value ...]   # one run, or a sweep/replicates
    socialgym resume DIR [--budget requests=N,usd=X]             # continue after a crash, a kill or the budget
    socialgym estimate CONFIG [--throughput P,C | --probe]       # requests, tokens, USD and time, before a run
    socialgym report DIR                                         # rebuild plots/, report.html and viewer.html
    socialgym view DIR [--serve]                                 # viewer.html: the run replayed round by round
    socialgym demo [--no-llm] [--out DIR]                        # zero-config: LLM agents, embedded model
    socialgym moderation --out DIR [--discussions N ...]         # the six moderation strategies compared
    socialgym study ties-coach --out DIR [--scale small|paper]   # the core paper's study, figures, claims
    socialgym fork DIR --at-round T --out DIR2 [--set k=v ...]   # continue DIR after round T, changed
    socialgym compare DIR_A DIR_B | SWEEP                        # paired differences per round, intervals
    socialgym interview DIR --agent agent_3 --round 10 "question" # ask a run's LLM agent (DIR unchanged)
    socialgym validate RUN_DIR... [--out DIR]                    # the realism scorecard of one or more runs
    socialgym calibrate CONFIG --targets FILE --out DIR          # fit the scripted population to the facts
    socialgym distill RUN_DIR... --out model.pt [--report DIR]   # clone LLM agents into a cheap network
    socialgym doctor [--json] [--no-model]                       # what this machine can do, each row with its fix

Every failure a user can cause or meet prints one line, ``socialgym: error: ...``. Exit status:
0 done; 1 a run finished with problems (summary.json's ``problems``, e.g. too many LLM
fallbacks); 2 a bad config, run directory or checkpoint, or an LLM server that refuses the key or
the model; 3 another socialgym process is writing that directory; 4 an operating-system error
(disk full, read-only, permission denied, a name too long, a file where a folder is needed);
5 the run stopped before a round that would pass its ``llm.budget`` (summary.json says
``budget``; ``resume --budget`` raises it and continues); 6 the LLM server is gone (the embedded
server's process died, named with its signal or exit code, or no request of a whole round reached
any server): the round is not kept and ``resume`` continues once a server runs; 130 interrupted
(Ctrl-C: summary.json says ``interrupted``, and ``resume`` continues).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from socialgym.agents.demo import COMPACT_POLICY
from socialgym.llm.text import GENERATION_MODES
from socialgym.platform.actions import CONTENT_TYPES
from socialgym.rundir import is_sweep, layout

EXIT_PROBLEMS, EXIT_USAGE, EXIT_BUSY, EXIT_OS, EXIT_BUDGET, EXIT_SERVER, EXIT_INTERRUPTED = 1, 2, 3, 4, 5, 6, 130

DEMO_CONFIG = {
    "seed": 0,
    "env": {"n_agents": 6, "n_actions": 2, "max_rounds": 4, "recommender": "random", "feed_size": 4,
            "vote_feed_size": 3},
    "policy": {"kind": "llm", "coach": False, "params": COMPACT_POLICY},
    "llm": {"max_concurrency": 1},
    "logging": {"transcripts": True},
}
DEMO_NO_LLM = {
    "seed": 0,
    "env": {"n_agents": 30, "max_rounds": 15, "recommender": "random"},
    "policy": {"groups": [{"name": "greedy", "kind": "greedy", "agents": 20},
                          {"name": "random", "kind": "random"}]},
}


def main(argv: list[str] | None = None) -> int:
    from socialgym.experiments.studies import moderation

    argv = sys.argv[1:] if argv is None else list(argv)
    from socialgym.experiments.studies.registry import STUDY

    if len(argv) >= 2 and argv[0] == "study" and argv[1] in STUDY and STUDY[argv[1]].own_loop:
        return _own_loop_study(argv[1], argv[2:])        # its own arguments: `socialgym study NAME --help`
    parser = build_parser()
    args = parser.parse_args(argv)

    from socialgym.experiments import ConfigError, RunError
    from socialgym.experiments.run.checkpoint import CheckpointError
    from socialgym.llm.client import LLMFatalError, LLMServerDown
    from socialgym.rundir import DirectoryBusy, RunDirError

    commands = {"run": _run, "resume": _resume, "report": _report, "view": _view, "study": _study,
                "fork": _fork, "compare": _compare, "interview": _interview, "demo": _demo, "estimate": _estimate,
                "moderation": moderation.run_command, "validate": _validate, "calibrate": _calibrate,
                "distill": _distill, "doctor": _doctor}
    try:
        return commands[args.command](args)
    except LLMServerDown as exc:
        return _fail(exc, EXIT_SERVER)
    except (ConfigError, RunError, LLMFatalError, CheckpointError, RunDirError) as exc:
        return _fail(exc, EXIT_USAGE)
    except DirectoryBusy as exc:
        return _fail(exc, EXIT_BUSY)
    except OSError as exc:             # disk full, read-only, permission, a name too long, a file for a folder
        where = f"{exc.filename}: " if exc.filename else ""
        return _fail(f"{where}{exc.strerror or exc}", EXIT_OS)
    except KeyboardInterrupt:
        return _fail("interrupted; a run continues with `socialgym resume DIR` from its last completed round",
                     EXIT_INTERRUPTED)


def _own_loop_study(name: str, argv: list[str]) -> int:
    """``socialgym study NAME ...`` for a study with its own ``main(argv)``: its bad arguments are
    one line, exit status 2, as for every command."""
    from socialgym.experiments import ConfigError, RunError
    from socialgym.experiments.studies.registry import STUDY

    program, sys.argv[0] = sys.argv[0], f"socialgym study {name}"      # its usage line names the command
    try:
        result = STUDY[name].main(argv)
    except (ValueError, TypeError, ConfigError, RunError) as exc:
        return _fail(f"study {name}: {exc}", EXIT_USAGE)
    except KeyboardInterrupt:
        return _fail("interrupted", EXIT_INTERRUPTED)
    finally:
        sys.argv[0] = program
    return result if isinstance(result, int) else 0


def int_in(low: int, high: int | None = None):
    """An argparse ``type``: an integer in ``low..high`` (``high`` None: no upper bound), else
    argparse's one-line usage error naming the option and the range."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < low or (high is not None and value > high):
            span = f"an integer >= {low}" if high is None else f"an integer in {low}..{high}"
            raise argparse.ArgumentTypeError(f"must be {span}, got {text[:40]!r}")
        return value
    parse.__name__ = "integer"
    return parse


SEED = int_in(0, 2**32 - 1)
"""A seed every back end takes (numpy, torch and Optuna's samplers alike)."""
PORT = int_in(0, 65535)


def _fail(message, status: int) -> int:
    print(f"socialgym: error: {' '.join(str(message).split())}", file=sys.stderr)
    return status


def build_parser() -> argparse.ArgumentParser:
    """The command line: one sub-command per verb (``socialgym --help``)."""
    from socialgym import doctor
    from socialgym.experiments.studies import moderation

    parser = argparse.ArgumentParser(prog="socialgym", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    _add_run_commands(sub)
    _add_page_commands(sub)
    _add_study_command(sub)
    _add_branch_commands(sub)
    _add_realism_commands(sub)
    _add_distill_command(sub)
    p_mod = sub.add_parser("moderation", help="compare the six LLM moderation strategies in synthetic discussions",
                           description=moderation.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    moderation.add_arguments(p_mod)
    p_doc = sub.add_parser("doctor", help="one table of what this machine can and cannot do for socialgym, each "
                                          "check with the command that fixes it (exit 1: a check failed)",
                           description=doctor.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    doctor.add_arguments(p_doc)
    return parser


def _add_run_commands(sub) -> None:
    p_run = sub.add_parser("run", help="run an experiment from a YAML config")
    p_run.add_argument("config")
    p_run.add_argument("--out", required=True, help="the run (or sweep) directory to create")
    p_run.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                       help="override a config key, e.g. --set env.n_agents=50 (repeatable)")
    p_run.add_argument("--quiet", action="store_true", help="no progress line")
    p_resume = sub.add_parser("resume", help="continue an interrupted run (or sweep) from its last round")
    p_resume.add_argument("dir")
    p_resume.add_argument("--quiet", action="store_true")
    p_resume.add_argument("--trust", action="store_true",
                          help="load a checkpoint not signed by this user's key (one from someone else: opening "
                               "it can run code, so only for files you trust)")
    p_resume.add_argument("--allow-config-change", action="store_true",
                          help=f"continue although {layout.CONFIG} was edited since the checkpoint (only its llm, "
                               "logging and run sections and the interventions and surveys of later rounds "
                               "take effect)")
    p_resume.add_argument("--budget", default=None, metavar="KEY=VALUE,...",
                          help="set these limits of llm.budget first (requests, prompt_tokens, completion_tokens, "
                               f"usd), e.g. --budget requests=2000,usd=5; recorded in {layout.RUN_INFO}")
    p_est = sub.add_parser("estimate", help="predict a config's LLM requests, tokens, USD and wall time by "
                                            "simulating it against a stand-in model")
    p_est.add_argument("config")
    p_est.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                       help="override a config key, as for run (repeatable)")
    speed = p_est.add_mutually_exclusive_group()
    speed.add_argument("--throughput", default=None, metavar="PROMPT_TOK_S,COMPLETION_TOK_S",
                       help="the server's prompt and completion tokens per second, for the wall time")
    speed.add_argument("--probe", action="store_true",
                       help="measure the throughput with a few short requests to the config's server(s)")
    p_est.add_argument("--text-chars", type=int_in(1, 100_000), default=None, metavar="N",
                       help="every free text the stand-in writes has N characters (default: 3/4 of each "
                            "text's limit)")
    p_est.add_argument("--json", action="store_true", help="print the estimate as JSON")


def _add_page_commands(sub) -> None:
    p_report = sub.add_parser("report", help=f"(re)build plots and {layout.REPORT} of a run or sweep")
    p_report.add_argument("dir")
    p_view = sub.add_parser("view", help=f"write DIR/{layout.VIEWER}: the run replayed round by round (or a "
                                         "moderation run's discussions)")
    p_view.add_argument("dir")
    p_view.add_argument("--serve", action="store_true", help="serve it on 127.0.0.1 and open a browser")
    p_view.add_argument("--port", type=PORT, default=0, help="with --serve (default: any free port)")
    p_demo = sub.add_parser("demo", help="a short simulation with LLM agents on the embedded model")
    p_demo.add_argument("--no-llm", action="store_true", help="scripted agents (greedy + random) instead")
    p_demo.add_argument("--out", default=None, help="run directory (default: runs/demo[-no-llm]-N)")
    p_demo.add_argument("--generation", choices=GENERATION_MODES, default="split",
                        help="LLM agents: 'split' plans under a schema and asks for each text plainly (what a "
                             "small local model needs), 'joint' writes texts inside the plan's JSON, 'auto' "
                             "picks split for local models (default: split)")


def _add_study_command(sub) -> None:
    from socialgym.experiments.studies.registry import RUNNER_STUDIES, STUDIES

    own = ", ".join(s.name for s in STUDIES if s.own_loop)
    p_study = sub.add_parser("study", help="a paper's study as one command (`socialgym study --list` lists them)",
                             description="Runner-driven studies take the options below (resumable: re-run with "
                                         f"the same --out). The own-loop studies ({own}) take their own: "
                                         "`socialgym study NAME --help`.")
    p_study.add_argument("name", nargs="?", choices=RUNNER_STUDIES, metavar="NAME",
                         help=f"{', '.join(RUNNER_STUDIES)} (every study with one line: --list)")
    p_study.add_argument("--list", action="store_true", help="every study, one line each")
    p_study.add_argument("--out", default=None, help="the study directory (required to run one)")
    p_study.add_argument("--scale", choices=("small", "paper", "scripted", "llm"), default=None,
                         help="ties-coach: small (default; the embedded model on 2 cores in about 30 minutes) or "
                              "paper (30 agents x 15 rounds); soc-strategy and misinformation: scripted (default; "
                              "seconds) or llm (the embedded model; docs/experiments.md gives the time)")
    p_study.add_argument("--fork-at", type=int_in(0), default=None,
                         help="fork the conditions from the first one after this round (run.fork_at)")
    p_study.add_argument("--replicates", type=int_in(1, 10_000), default=None, help="replicates per condition (config default)")
    p_study.add_argument("--base-url", default=None, help="an OpenAI-compatible server (default: embedded model)")
    p_study.add_argument("--model", default=None)
    p_study.add_argument("--quiet", action="store_true")


def _add_branch_commands(sub) -> None:
    p_fork = sub.add_parser("fork", help="continue a run from its state after a round, with changes (a "
                                         "counterfactual branch)")
    p_fork.add_argument("dir")
    p_fork.add_argument("--at-round", type=int_in(0), required=True, help="the round whose end state the fork starts from")
    p_fork.add_argument("--out", required=True, help="the new run directory")
    p_fork.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="a change, e.g. --set env.recommender=mf or --set 'interventions=[...]' (repeatable)")
    p_fork.add_argument("--trust", action="store_true", help="load a snapshot not signed by this user's key")
    p_fork.add_argument("--quiet", action="store_true")
    p_cmp = sub.add_parser("compare", help="paired differences B - A per round (rewards, network, cocoon, "
                                           "surveys) with intervals over replicates")
    p_cmp.add_argument("a", help="a run, a folder of replicate runs (rep_*), or a sweep (each condition vs the first)")
    p_cmp.add_argument("b", nargs="?", default=None)
    p_cmp.add_argument("--out", default=None, help=f"the CSV to write (default: B/{layout.COMPARE_CSV})")
    p_int = sub.add_parser("interview", help="ask an LLM agent of a finished run a question, from its state after "
                                             "a round (the run directory is not changed)")
    p_int.add_argument("dir")
    p_int.add_argument("question")
    p_int.add_argument("--agent", required=True)
    p_int.add_argument("--round", type=int_in(0), default=None, help="default: the last completed round")
    p_int.add_argument("--scale", default="text", help="text (default), likert5, 0-10 or 1-10")
    p_int.add_argument("--trust", action="store_true", help="load a snapshot not signed by this user's key")


def _add_realism_commands(sub) -> None:
    p_val = sub.add_parser("validate", help="the realism scorecard: stylised facts of one or more runs against "
                                            "published platform statistics (docs/realism.md)")
    p_val.add_argument("dirs", nargs="+", metavar="RUN_DIR",
                       help="run directories, or sweep / study directories (every run inside is scored)")
    p_val.add_argument("--out", default=None, help=f"write {layout.REALISM_MD}, .json, .csv and .html here")
    p_cal = sub.add_parser("calibrate", help="fit the social_users population's parameters to target facts "
                                             "(Optuna; resumable: re-run with the same --out)")
    p_cal.add_argument("config", help="a run config whose policy (or a group) is social_users")
    p_cal.add_argument("--targets", required=True, help="YAML/JSON: facts -> band or \"reference\" (docs/realism.md)")
    p_cal.add_argument("--out", required=True, help="the calibration directory (resumed when it exists)")
    p_cal.add_argument("--trials", type=int, default=60, help="complete trials to reach, all workers together")
    p_cal.add_argument("--minutes", type=float, default=25.0, help="search time of this invocation")
    p_cal.add_argument("--seeds", type=int, default=2, help="runs per trial (seeds 0, 1, ...)")
    p_cal.add_argument("--eval-seeds", type=int, default=3, help="held-out runs of the before / after scorecards")
    p_cal.add_argument("--workers", type=int, default=None, help="search processes (default: the number of cores)")
    p_cal.add_argument("--name", default="calibrated", help="the population set's name (DIR/NAME.json)")
    p_cal.add_argument("--seed", type=SEED, default=0, help="the sampler's seed")
    p_cal.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                       help="override a config key, as for run (repeatable)")


def _add_distill_command(sub) -> None:
    p = sub.add_parser("distill", help="behaviour-clone the LLM agents of runs logged with logging.decisions "
                                       "into a network (a distilled policy group), with a fidelity report")
    p.add_argument("dirs", nargs="+", metavar="RUN_DIR", help="runs with decision logs; the last --holdout are held out")
    p.add_argument("--out", required=True, help="the model file to write (model.pt)")
    p.add_argument("--holdout", type=int_in(0), default=1, help="runs held out for agreement and fidelity (default 1)")
    p.add_argument("--report", default=None, help=f"write {layout.FIDELITY_MD} and {layout.FIDELITY_JSON} here, "
                                                  "replaying each held-out run with the distilled policy")
    p.add_argument("--epochs", type=int_in(1, 100_000), default=None, help="training passes over the decisions")
    p.add_argument("--hidden", type=int_in(1, 4096), default=None, help="width of the network's hidden layers")
    p.add_argument("--seed", type=SEED, default=0, help="the training seed")


def _doctor(args) -> int:
    from socialgym.doctor import run_command

    return run_command(args)


def _distill(args) -> int:
    import dataclasses

    try:
        from socialgym.training.distill import Args
    except ImportError as exc:
        return _fail(exc, EXIT_USAGE)
    from socialgym.experiments.analysis.fidelity import fidelity_markdown
    from socialgym.experiments.run.distill import distill, summary_line

    given = {k: getattr(args, k) for k in ("epochs", "hidden") if getattr(args, k) is not None}
    result = distill(args.dirs, args.out, holdout=args.holdout, report=args.report,
                     args=dataclasses.replace(Args(seed=args.seed), **given))
    print(fidelity_markdown(result))
    print(summary_line(result))
    return 0


def _validate(args) -> int:
    from socialgym.experiments import RunError
    from socialgym.experiments.analysis.realism import markdown_table, run_dirs_in, scorecard, write_scorecard

    try:
        card = scorecard([d for given in args.dirs for d in run_dirs_in(given)])
    except (OSError, ValueError, ImportError) as exc:
        raise RunError(f"validate: {exc}") from None
    print(markdown_table(card))
    for note in card.notes:
        print(f"note: {note}")
    if args.out:
        paths = write_scorecard(card, args.out)
        print(f"scorecard: {paths[layout.REALISM_HTML]}")
    return 0


def _calibrate(args) -> int:
    from socialgym.experiments.run.calibrate import calibrate, calibration_markdown

    result = calibrate(args.config, args.targets, args.out, trials=args.trials, minutes=args.minutes,
                       seeds=args.seeds, eval_seeds=args.eval_seeds, workers=args.workers, name=args.name,
                       seed=args.seed, overrides=tuple(args.overrides))
    print(calibration_markdown(result))
    print(f"population: {result['population']} (use it with policy.params.population)")
    return 0


def _run(args) -> int:
    from socialgym.experiments import load_config, run_experiment

    cfg = load_config(args.config, args.overrides)
    progress = False if args.quiet else None
    if cfg.sweep or cfg.run.replicates > 1:
        from socialgym.experiments.run import sweep as sweeps
        result = sweeps.run_sweep(cfg, args.out, progress=progress)
        return _print_sweep(args.out, result, "written to")
    summary = run_experiment(cfg, args.out, progress=progress)
    return _print_done(args.out, summary)


def _resume(args) -> int:
    from socialgym.experiments import resume_experiment

    progress = False if args.quiet else None
    budget = _budget_arg(args.budget)
    if is_sweep(args.dir):
        from socialgym.experiments.run import sweep as sweeps
        from socialgym.experiments.run.spending import set_budget
        from socialgym.rundir.lock import writer_lock
        with writer_lock(args.dir, "resume"):         # no job config rewritten while another process runs it
            if budget:
                set_budget(args.dir, budget)
            result = sweeps.resume_sweep(args.dir, progress=progress, trust=args.trust,
                                         allow_config_change=args.allow_config_change)
        return _print_sweep(args.dir, result, "complete in")
    return _print_done(args.dir, resume_experiment(args.dir, progress=progress, trust=args.trust,
                                                   allow_config_change=args.allow_config_change, budget=budget))


def _budget_arg(text: str | None) -> dict | None:
    if text is None:
        return None
    from socialgym.experiments import ConfigError
    from socialgym.llm.budget import Budget, BudgetError

    try:
        return Budget.parse(text)
    except BudgetError as exc:
        raise ConfigError(str(exc)) from None


def _estimate(args) -> int:
    import json

    from socialgym.experiments import ConfigError, load_config
    from socialgym.experiments.run.estimate import Throughput, estimate, format_estimate, probe
    from socialgym.experiments.run.standin import ReplyModel
    from socialgym.rundir.files import finite_json

    cfg = load_config(args.config, args.overrides)
    if args.text_chars is not None and args.text_chars < 1:
        raise ConfigError(f"--text-chars must be a positive number of characters, got {args.text_chars}")
    throughput = Throughput.parse(args.throughput) if args.throughput else probe(cfg) if args.probe else None
    result = estimate(cfg, replies=ReplyModel(chars=args.text_chars), throughput=throughput)
    # strict JSON: a wall time past float range (a throughput of 1e-300) is null, never Infinity
    print(json.dumps(finite_json(result), indent=2, allow_nan=False) if args.json
          else format_estimate(result, args.config))
    return 0


def _report(args) -> int:
    from socialgym.experiments import RunError
    from socialgym.experiments.run.runner import build_pages

    if is_sweep(args.dir):
        from socialgym.experiments.run import sweep as sweeps
        sweeps.aggregate(args.dir)
        print(f"aggregate and comparison plots rebuilt in {args.dir}")
        return 0
    try:
        print(f"report: {build_pages(Path(args.dir))}")
    except (OSError, ValueError) as exc:       # not a run directory, or damaged files
        raise RunError(f"report: {exc}") from None
    return 0


def _view(args) -> int:
    from socialgym.experiments import RunError
    from socialgym.viewer import ViewerError, build_viewer

    try:
        page = build_viewer(args.dir)
    except ViewerError as exc:
        raise RunError(f"view: {exc}") from None
    print(f"viewer: {page.resolve()}")
    if args.serve:
        _serve(page, args.port)
    return 0


def _serve(page: Path, port: int) -> None:
    """Serve the page alone on loopback until Ctrl-C (the page itself needs no server: this is
    for browsers that restrict file:// pages; socialgym.viewer.serve says what is answered)."""
    import os
    import webbrowser

    from socialgym.viewer.serve import page_server

    with page_server(page, port) as server:
        url = f"http://127.0.0.1:{server.server_address[1]}/{page.name}"
        print(f"serving {url} (Ctrl-C stops)", flush=True)
        if sys.platform in ("darwin", "win32") or os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"):
            webbrowser.open(url)          # (without a display, webbrowser could start a text browser)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass


def _demo(args) -> int:
    from socialgym.experiments import load_config, run_experiment

    name = "demo-no-llm" if args.no_llm else "demo"
    out = Path(args.out) if args.out else _fresh(Path("runs") / name)
    overrides = [] if args.no_llm else [f"policy.params.generation={args.generation}"]
    cfg = load_config(DEMO_NO_LLM if args.no_llm else DEMO_CONFIG, overrides)
    what = "scripted agents (greedy + random)" if args.no_llm else \
        "LLM agents on the embedded SmolLM2-135M model (llama.cpp, started for this run)"
    print(f"socialgym demo: {cfg.env['n_agents']} {what}, {cfg.env['max_rounds']} rounds -> {out}")
    summary = run_experiment(cfg, out)
    status = _print_done(out, summary)
    if not args.no_llm:
        _print_text_quality(out)
    return status


def _print_text_quality(out: Path) -> None:
    """How many of the agents' texts are English-like (docs/llm.md), when a word list is present."""
    from socialgym.metrics.language import english_share, load_wordlist
    from socialgym.rundir import Run

    try:
        words = load_wordlist()
    except FileNotFoundError:
        return
    events = [e for e in Run(out).events if e is not None]
    q = english_share([e["text"] for e in events if e.get("kind") in CONTENT_TYPES], words)
    if q["texts"]:
        print(f"texts: {q['english_like']} of {q['texts']} English-like ({100 * q['share']:.0f} %)")


def _study(args) -> int:
    from socialgym.experiments.studies.registry import study_listing

    if args.list or args.name is None:
        print(study_listing())
        return 0
    if args.out is None:
        return _fail(f"study {args.name}: --out DIR is required", EXIT_USAGE)
    if args.name == "platform-objectives":
        from socialgym.experiments.studies.platform_objectives import run_study as platform_study

        seeds = {"train_seeds": args.replicates} if args.replicates else {}
        result = platform_study(args.out, log=None if args.quiet else print, **seeds)
        print(f"Milli et al.'s direction: {result['milli']['verdict']} ({result['milli'].get('text', '')}); "
              f"{Path(args.out) / 'summary.md'}, {Path(args.out) / 'pareto.png'}")
        return 0
    from socialgym.experiments.studies.ties_coach import run_study

    result = run_study(args.name, args.out, scale=args.scale, replicates=args.replicates, base_url=args.base_url,
                       model=args.model, progress=False if args.quiet else None, fork_at=args.fork_at)
    for claim, verdict in result["claims"].items():
        print(f"{verdict:>13}  {claim}")
    print(f"study of {result['runs']} runs: {result['html']}")
    return _print_problems(result)


def _fork(args) -> int:
    from socialgym.experiments.run.fork import fork_run

    summary = fork_run(args.dir, args.at_round, args.out, overrides=args.overrides, trust=args.trust,
                       progress=False if args.quiet else None)
    return _print_done(args.out, summary)


def _compare(args) -> int:
    from socialgym.experiments.analysis.compare import compare
    from socialgym.experiments.run.sweep import compare_sweep

    if args.b is None:
        if not is_sweep(args.a):
            from socialgym.experiments import RunError
            raise RunError(f"compare: give two runs (or replicate folders), or one sweep; {args.a} is no sweep")
        results = compare_sweep(args.a)
    else:
        results = [compare(args.a, args.b, args.out)]
    for result in results:
        print(f"{result['csv']} ({result['pairs']} pairs); summary {result['md']}")
        for warning in result["warnings"]:
            print(f"socialgym: warning: {warning}", file=sys.stderr)
    return 0


def _interview(args) -> int:
    import json

    from socialgym.experiments.run.fork import interview_run
    from socialgym.rundir.files import finite_json

    print(json.dumps(finite_json(interview_run(args.dir, args.agent, args.question, round=args.round,
                                               scale=args.scale, trust=args.trust)), ensure_ascii=False,
                     allow_nan=False))
    return 0


def _fresh(base: Path) -> Path:
    k = 1
    while (base.parent / f"{base.name}-{k}").exists():
        k += 1
    return base.parent / f"{base.name}-{k}"


def _print_sweep(out, result: dict, verb: str) -> int:
    """A sweep's outcome: its jobs that stopped for their budget (one line, exit status 5), else
    those that finished with problems (exit status 1)."""
    from socialgym.experiments.run.spending import budget_stops

    stopped = budget_stops(out)
    if stopped:
        print(f"sweep of {result['jobs']} runs in {out}: {len(stopped)} stopped at their budget")
        first = stopped[0].get("stopped") or {}
        print(f"socialgym: budget: {len(stopped)} of {result['jobs']} sweep runs stopped before a round that "
              f"would pass their llm.budget.{first.get('limit')} (each run has its own budget; the first stopped "
              f"before round {first.get('before_round')}); continue with `socialgym resume {out} --budget "
              f"{first.get('limit')}=N`", file=sys.stderr)
        _print_problems(result)
        return EXIT_BUDGET
    print(f"sweep of {result['jobs']} runs {verb} {out}" + (f" ({layout.AGGREGATE}, {layout.PLOTS}/)"
                                                             if verb == "written to" else ""))
    return _print_problems(result)


def _print_problems(result: dict) -> int:
    """A sweep's runs that finished with problems (e.g. too many LLM fallbacks): exit status 1."""
    for problem in result.get("problems", []):
        print(f"socialgym: error: {problem}", file=sys.stderr)
    return 1 if result.get("problems") else 0


def _print_done(out, summary: dict) -> int:
    """Print the run's outcome; the exit status: 1 when the summary lists problems."""
    rewards = summary.get("final", {}).get("rewards", {})
    line = ", ".join(f"{k} {v:.3f}" for k, v in rewards.items())
    print(f"run {summary['status']}: {summary['rounds_completed']} rounds, {summary['n_agents']} agents, "
          f"{summary['seconds']:.1f} s; final mean rewards: {line}")
    if summary.get("llm"):
        llm = summary["llm"]
        print(f"LLM: {llm['requests']} requests ({llm['cached']} cached), {llm['prompt_tokens']} prompt + "
              f"{llm['completion_tokens']} completion tokens, {llm['fallbacks']} fallbacks")
    report, viewer = Path(out) / layout.REPORT, Path(out) / layout.VIEWER
    if report.exists():
        print(f"report: {report.resolve()}")
    if viewer.exists():
        print(f"viewer: {viewer.resolve()}")
    if not report.exists():
        print(f"outputs: {Path(out).resolve()}")
    for problem in summary.get("problems", []):
        print(f"socialgym: error: {problem}", file=sys.stderr)
    if summary.get("status") == "budget":
        print(f"socialgym: {' '.join(str((summary.get('stopped') or {}).get('message', 'budget')).split())}",
              file=sys.stderr)
        return EXIT_BUDGET
    return 1 if summary.get("problems") else 0


if __name__ == "__main__":
    sys.exit(main())
