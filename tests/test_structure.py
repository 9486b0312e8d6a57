"""The package's shape, checked from its source with ``ast`` (issue 27).

- no module in ``socialgym/`` over 800 lines, no function over 80 lines;
- no private name (``_x``, not a dunder) imported from another module, nor read as an attribute
  of an imported socialgym module: what is shared is public;
- a run-directory file name (``socialgym.rundir.layout``) is written as a string literal only in
  the package that owns the format, ``socialgym/rundir/`` (docstrings may name files);
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
