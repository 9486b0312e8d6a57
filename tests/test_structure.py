"""The package's shape, checked from its source with ``ast`` (issue 27).

- no module in ``socialgym/`` over 800 lines, no function over 80 lines;
- no private name (``_x``, not a dunder) imported from another module, nor read as an attribute
  of an imported socialgym module: what is shared is public;
- a run-directory file name (``socialgym.rundir.layout``) is written as a string literal only in
  the package that owns the format, ``socialgym/rundir/`` (docstrings may name files);
- no module outside ``socialgym/rundir/`` opens a run's file to read it: it reads through
  ``socialgym.rundir.Run`` (issue 45; ``NOT_YET_THROUGH_RUN`` lists the writers, which read back what they wrote);
- ``RUNTIME_PARAMS`` is defined once.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "socialgym"
MAX_MODULE_LINES = 800
MAX_FUNCTION_LINES = 80
SOURCES = {path: path.read_text(encoding="utf-8") for path in sorted(PACKAGE.rglob("*.py"))}
TREES = {path: ast.parse(text, str(path)) for path, text in SOURCES.items()}


def _rel(path: Path) -> str:
    return path.relative_to(PACKAGE.parent).as_posix()


def _module(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_no_module_over_800_lines():
    long = [f"{_rel(p)}: {len(text.splitlines())} lines" for p, text in SOURCES.items()
            if len(text.splitlines()) > MAX_MODULE_LINES]
    assert not long, f"modules over {MAX_MODULE_LINES} lines:\n" + "\n".join(long)


def test_no_function_over_80_lines():
    long = [f"{_rel(p)}:{node.lineno} {node.name}: {node.end_lineno - node.lineno + 1} lines"
            for p, tree in TREES.items() for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines:\n" + "\n".join(long)


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _absolute(module: str, path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    base = package.split(".")[: len(package.split(".")) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def private_imports() -> list[str]:
    """``from m import _x`` of another module, and ``alias._x`` where ``alias`` is an imported
    socialgym module (``import socialgym.a.b as alias`` or ``from socialgym.a import b``)."""
    modules = {_module(p) for p in SOURCES}
    found = []
    for path, tree in TREES.items():
        me = _module(path)
        aliases: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                source = _absolute(me, path, node)
                for alias in node.names:
                    if _private(alias.name) and source != me:
                        found.append(f"{_rel(path)}:{node.lineno} imports {alias.name} from {source}")
                    if f"{source}.{alias.name}" in modules:
                        aliases[alias.asname or alias.name] = f"{source}.{alias.name}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("socialgym") and alias.asname:
                        aliases[alias.asname] = alias.name
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id in aliases and _private(node.attr) and aliases[node.value.id] != me):
                found.append(f"{_rel(path)}:{node.lineno} reads {aliases[node.value.id]}.{node.attr}")
    return found


def test_no_private_name_imported_from_another_module():
    found = private_imports()
    assert not found, "private names used across modules (make what is shared public):\n" + "\n".join(found)


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
        # an attribute's docstring: a bare string right after an assignment
        for field in ("body", "orelse"):
            stmts = getattr(node, field, None)
            if isinstance(stmts, list):
                for before, after in zip(stmts, stmts[1:]):
                    if isinstance(before, (ast.Assign, ast.AnnAssign)) and isinstance(after, ast.Expr) \
                            and isinstance(after.value, ast.Constant):
                        ids.add(id(after.value))
    return ids


def run_directory_names() -> dict[str, str]:
    """file name -> its constant in socialgym/rundir/layout.py (the names with a suffix)."""
    tree = ast.parse((PACKAGE / "rundir" / "layout.py").read_text(encoding="utf-8"))
    return {node.value.value: node.targets[0].id for node in tree.body
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str) and "." in node.value.value}


def literal_file_names() -> list[str]:
    names = run_directory_names()
    pattern = re.compile(r"(?<![\w.-])(" + "|".join(re.escape(n) for n in names) + r")(?![\w])")
    found = []
    for path, tree in TREES.items():
        if path.parent == PACKAGE / "rundir":
            continue
        skip = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
                for match in pattern.finditer(node.value):
                    found.append(f"{_rel(path)}:{node.lineno} {match.group(1)!r} "
                                 f"(socialgym.rundir.layout.{names[match.group(1)]})")
    return found


def test_run_directory_names_only_in_their_module():
    assert len(run_directory_names()) >= 20
    found = literal_file_names()
    assert not found, "run-directory file names written outside socialgym/rundir:\n" + "\n".join(found)


# ---------------------------------------------------------------------------------- one run reader (issue 45)
RUN_FILES = {"CONFIG", "RUN_INFO", "SUMMARY", "ROUNDS", "NETWORK", "EVENTS", "TRANSCRIPTS", "SURVEYS", "INTERVIEWS",
             "FALLBACKS", "ROUTES", "PERSONAS", "LLM_CACHE", "CHECKPOINT", "SNAPSHOTS", "TIES", "DECISIONS", "TEXT_FILES"}
"""The constants of socialgym.rundir.layout that name a file (or folder of files) of one run."""
RUN_PATHS = {"tie_path", "decision_path", "snapshot_path", "tie_files", "decision_files", "snapshot_files",
             "stray_round_files"}
"""layout's functions that give the paths of a run's per-round files."""
READS = {"open", "read_text", "read_bytes", "load", "DictReader", "reader", "read_json", "read_jsonl", "read_csv",
         "read_records", "load_tie_matrix", "load_decision_file", "connect"}
"""Calls that open a file to read it (``open`` in a writing mode is a write). ``load_config`` is not one:
config.yaml as a validated Config is the config layer's to read; nor is a copy (``shutil.copyfile``,
sqlite's ``backup``: :func:`_copies`), which moves a file's bytes into another without reading them."""
NOT_YET_THROUGH_RUN = {
    # the writers: the recorder and the runner read back what they wrote (digests of the files a
    # checkpoint records, the tail of a file cut back on resume, a policy's weights) ...
    "socialgym/experiments/run/recorder.py",
    "socialgym/experiments/run/runner.py",
    "socialgym/experiments/run/checkpoint.py",       # ... and the digest of config.yaml a checkpoint records
}
"""Modules outside socialgym/rundir/ that still open a run's files themselves. Shrink it: a module
that reads through ``socialgym.rundir.Run`` comes off (the test says when one no longer needs it)."""


def _layout_aliases(tree: ast.AST) -> tuple[set[str], set[str]]:
    """(names bound to the layout module, run-file names imported from it) in a module."""
    modules, names = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "socialgym.rundir":
            modules |= {a.asname or a.name for a in node.names if a.name == "layout"}
        elif isinstance(node, ast.ImportFrom) and node.module == "socialgym.rundir.layout":
            names |= {a.asname or a.name for a in node.names if a.name in RUN_FILES | RUN_PATHS}
        elif isinstance(node, ast.Import):
            modules |= {a.asname for a in node.names if a.name == "socialgym.rundir.layout" and a.asname}
    return modules, names


def _is_write(call: ast.Call, name: str) -> bool:
    """``open(path, "w")``, ``path.open("a")``, ``open(path, mode="x")``: a write, not a read."""
    args = call.args[1:] if name == "open" and isinstance(call.func, ast.Name) else call.args
    modes = [*args[:1], *(k.value for k in call.keywords if k.arg == "mode")]
    flags = {n.attr for m in modes for n in ast.walk(m) if isinstance(n, ast.Attribute)}     # os.open(path, os.O_...)
    return name == "open" and (bool(flags & {"O_WRONLY", "O_RDWR", "O_CREAT", "O_APPEND"}) or any(
        isinstance(m, ast.Constant) and set(str(m.value)) & set("wax") for m in modes))


def _copies(nodes) -> set[int]:
    """The calls of ``with connect(a) as x, connect(b) as y: x.backup(y)`` (ids): sqlite's copy of one
    database into another, like ``shutil.copyfile`` (no ``READS``) a copy of a run's file, not a read of it."""
    return {id(item.context_expr) for node in nodes if isinstance(node, ast.With) and len(node.body) == 1
            and isinstance(call := getattr(node.body[0], "value", None), ast.Call)
            and isinstance(call.func, ast.Attribute) and call.func.attr == "backup"
            and sorted(ast.unparse(a) for a in [call.func.value, *call.args])
            == sorted(ast.unparse(i.optional_vars) for i in node.items if i.optional_vars is not None)
            for item in node.items}


def _walk_scope(scope: ast.AST):
    """The nodes of a function (nested functions included) or of a module's top level (functions left out)."""
    todo = [scope]
    while todo:
        node = todo.pop()
        yield node
        todo += [c for c in ast.iter_child_nodes(node)
                 if not (isinstance(scope, ast.Module) and isinstance(c, (ast.FunctionDef, ast.AsyncFunctionDef)))]


def run_file_reads(trees: dict[Path, ast.AST] | None = None) -> dict[str, list[str]]:
    """module -> the places (outside socialgym/rundir/) where a run's file is opened to be read: a
    reading call (``READS``) on a path built from a run-file name of ``layout`` — directly, through a
    name assigned from one (in the function or the module), or through a parameter of a function of
    the same module that is handed one."""
    found: dict[str, list[str]] = {}
    for path, tree in (TREES if trees is None else trees).items():
        if path.parent == PACKAGE / "rundir":
            continue
        modules, names = _layout_aliases(tree)
        if not modules and not names:
            continue
        functions = {f.name: f for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
        tainted_params: dict[str, set[str]] = {}

        def mentions(node: ast.AST, tainted: set[str]) -> bool:
            """``node`` is the path of a run's file: a run-file name, a name given one, ``run / name``,
            ``layout.tie_path(...)``, ``Path(...)``, ``.items()``, ``[k]`` or a tuple of such."""
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules:
                return node.attr in RUN_FILES | RUN_PATHS
            if isinstance(node, ast.Name):
                return node.id in names or node.id in tainted
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
                return mentions(node.left, tainted) or mentions(node.right, tainted)
            if isinstance(node, ast.JoinedStr):
                return any(mentions(v.value, tainted) for v in node.values if isinstance(v, ast.FormattedValue))
            if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
                return any(mentions(e, tainted) for e in node.elts)
            if isinstance(node, ast.IfExp):
                return mentions(node.body, tainted) or mentions(node.orelse, tainted)
            if isinstance(node, (ast.Subscript, ast.Starred)):
                return mentions(node.value, tainted)
            if isinstance(node, ast.Call):
                func = node.func
                if mentions(func, tainted):          # layout.tie_files(run), an imported tie_path(...)
                    return True
                if (isinstance(func, ast.Name) and func.id == "Path") or (isinstance(func, ast.Attribute) and func.attr in {
                        "with_suffix", "with_name", "joinpath", "resolve", "items", "values", "get", "glob", "iterdir"}):
                    parts = [*node.args, *([func.value] if isinstance(func, ast.Attribute) else [])]
                    return any(mentions(p, tainted) for p in parts)
            return False

        def scan(scope: ast.AST, tainted: set[str], hits: list[str]) -> set[str]:
            nodes = list(_walk_scope(scope))
            for _ in range(4):                   # names assigned from names assigned from a run file ...
                for node in nodes:
                    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.NamedExpr)) and node.value \
                            is not None and mentions(node.value, tainted):
                        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                        tainted |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
                    elif isinstance(node, (ast.For, ast.comprehension)) and mentions(node.iter, tainted):
                        tainted |= {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}
                    elif isinstance(node, ast.withitem) and node.optional_vars is not None \
                            and mentions(node.context_expr, tainted):
                        tainted |= {n.id for n in ast.walk(node.optional_vars) if isinstance(n, ast.Name)}
            copies = _copies(nodes)
            for node in nodes:
                if not isinstance(node, ast.Call) or id(node) in copies:
                    continue
                func = node.func
                name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
                operands = [*node.args, *(k.value for k in node.keywords)]
                if isinstance(func, ast.Attribute) and name in {"read_text", "read_bytes", "open"}:
                    operands.append(func.value)
                if name in READS and not _is_write(node, name) and any(mentions(o, tainted) for o in operands):
                    hits.append(f"{node.lineno}: {ast.unparse(node)[:90]}")
                elif name in functions:          # handing a run file to a function of the module
                    params = [a.arg for a in functions[name].args.args]
                    for i, arg in enumerate(node.args[:len(params)]):
                        if mentions(arg, tainted):
                            tainted_params.setdefault(name, set()).add(params[i])
            return tainted

        for _ in range(3):                       # parameters handed a run file, then their functions again
            hits: list[str] = []
            module_names = scan(tree, set(), [])
            for function in functions.values():
                scan(function, module_names | tainted_params.get(function.name, set()), hits)
        if hits:
            found[_rel(path)] = sorted(set(hits), key=lambda h: int(h.split(":")[0]))
    return found


def test_the_scan_finds_a_run_file_opened_outside_run():
    def scan(source: str) -> list[str]:
        return run_file_reads({PACKAGE / "x" / "m.py": ast.parse(source)}).get("socialgym/x/m.py", [])

    head = "from socialgym.rundir import layout\n"
    assert scan(head + "def f(run):\n    return json.loads((run / layout.SUMMARY).read_text())\n")
    assert scan(head + "def f(run):\n    p = run / layout.EVENTS\n    q = p\n    return list(read_jsonl(q))\n")
    assert scan(head + "def g(file):\n    return read_csv(file)\ndef f(run):\n    return g(run / layout.ROUNDS)\n")
    assert scan(head + "def f(run):\n    for r, p in layout.tie_files(run).items():\n        np.load(p)\n")
    assert scan("from socialgym.rundir.layout import ROUNDS\ndef f(run):\n    open(run / ROUNDS)\n")
    assert not scan(head + "def f(run):\n    with open(run / layout.ROUNDS, 'a') as f:\n        f.write('x')\n")
    assert not scan(head + "def f(run):\n    return (run / layout.REPORT).read_text(), (run / layout.EVENTS).is_file()\n")
    assert not scan("def f(run):\n    return open(run / 'other.txt').read()\n")
    copy = "    with sqlite3.connect(run / layout.LLM_CACHE) as a, sqlite3.connect(out / layout.LLM_CACHE) as b:\n"
    assert not scan(head + "def f(run, out):\n" + copy + "        a.backup(b)\n")
    assert scan(head + "def f(run, out):\n" + copy + "        a.backup(b)\n        a.execute('select 1')\n")


def test_run_files_are_read_only_through_run():
    found = run_file_reads()
    outside = {m: hits for m, hits in found.items() if m not in NOT_YET_THROUGH_RUN}
    assert not outside, "modules that open a run's files themselves (read them through socialgym.rundir.Run):\n" \
        + "\n".join(f"{m}:{h}" for m, hits in outside.items() for h in hits)
    done = sorted(NOT_YET_THROUGH_RUN - set(found))
    assert not done, f"these no longer open a run's files themselves: take them off NOT_YET_THROUGH_RUN: {done}"


def test_runtime_params_defined_once():
    """The tie parameters that may change during a run are written out in one place
    (``socialgym.config.RUNTIME_PARAMS``); the env, the interventions and the fork rules refer to it."""
    value = ("half_life", "xi", "delta_max", "b_rec")
    written = [f"{_rel(p)}:{node.lineno}" for p, tree in TREES.items() for node in ast.walk(tree)
               if isinstance(node, (ast.Tuple, ast.List)) and len(node.elts) == len(value)
               and all(isinstance(e, ast.Constant) for e in node.elts)
               and sorted(e.value for e in node.elts) == sorted(value)]
    assert len(written) == 1 and written[0].startswith("socialgym/config.py:"), f"written out at {written}"


STATISTICS = "socialgym/experiments/analysis/statistics.py"


def _calls(tree: ast.AST, attribute: str) -> list[int]:
    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Attribute) and node.attr == attribute]


def test_intervals_only_in_the_statistics_module():
    """Bootstrap and t intervals have one home (issue 45): no other module defines a function
    named for a bootstrap or an interval, draws bootstrap resamples, or reads the t distribution."""
    found = []
    for p, tree in TREES.items():
        if _rel(p) == STATISTICS:
            continue
        found += [f"{_rel(p)}:{node.lineno} def {node.name}" for node in ast.walk(tree)
                  if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                  and re.search(r"bootstrap|(^|_)ci(95)?$|t_interval|mean_ci|half_width|band_distance", node.name)]
        found += [f"{_rel(p)}:{line} t.ppf" for line in _calls(tree, "ppf")]
    assert not found, "intervals defined outside the statistics module:\n" + "\n".join(found)
    assert {"bootstrap_mean", "mean_ci", "t_half_width", "band_distance", "band_distance_in_widths"} <= {
        node.name for node in ast.walk(TREES[PACKAGE.parent / STATISTICS]) if isinstance(node, ast.FunctionDef)}


def test_one_definition_of_each_shared_measure():
    """``gini`` and ``active_share`` are defined once (issue 45): two definitions had drifted
    apart (0 against NaN for an all-zero sample)."""
    for name in ("gini", "active_share"):
        where = [f"{_rel(p)}:{node.lineno}" for p, tree in TREES.items() for node in ast.walk(tree)
                 if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name]
        assert len(where) == 1, f"{name} defined at {where}"


def _string_tuples(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and len(node.elts) >= 2 \
                and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
            yield node.lineno, {e.value for e in node.elts}


def test_policy_kinds_in_one_table():
    """The policy kinds are named in one table (``socialgym.baselines.kinds``, issue 45): no other
    module writes a list of two or more kind names (they ask the table: ``KIND[k].model_file``,
    ``kinds_where(client=True)``)."""
    from socialgym.baselines.kinds import POLICY_KINDS

    table = "socialgym/baselines/kinds.py"
    found = [f"{_rel(p)}:{line} {sorted(names)}" for p, tree in TREES.items() if _rel(p) != table
             for line, names in _string_tuples(tree) if names <= set(POLICY_KINDS) and len(names) >= 2
             and _rel(p) != "socialgym/demo.py"]       # the scripted demo's --policy choice (greedy, random)
    assert not found, "policy kinds listed outside their table:\n" + "\n".join(found)


def test_recommender_names_in_one_table():
    """Recommender and re-ranker names are written once, in ``socialgym.config`` (issue 45): the
    registry pairs them with constructors; no module lists three or more of them again."""
    from socialgym.config import RECOMMENDER_NAMES, RERANK_KINDS

    found = [f"{_rel(p)}:{line} {sorted(names)}" for p, tree in TREES.items() if _rel(p) != "socialgym/config.py"
             for line, names in _string_tuples(tree)
             for table in (RECOMMENDER_NAMES, RERANK_KINDS) if names <= set(table) and len(names) >= 3]
    assert not found, "recommender names listed outside socialgym.config:\n" + "\n".join(found)
