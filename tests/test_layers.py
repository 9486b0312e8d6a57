"""The package's layers: no import cycle, and no import from a lower layer to a higher one.

Every module's imports are read with ``ast`` — those inside functions too, since a lazy import
is still a dependency — and checked against ``LAYERS``. A module may import its own layer and
the layers below it. Importing ``a.b.c`` also runs ``a/__init__`` and ``a/b/__init__``, so those
packages count as imported too (the root ``socialgym/__init__``, the public entry, excepted).
Cycles are looked for among the imports as written (a package's ``__init__`` importing its own
submodules is how packages work, not a cycle).

Also: ``import socialgym`` stays light — it loads neither scipy.stats, openai, torch nor
matplotlib (checked in a fresh interpreter).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "socialgym"

# Bottom to top. A module belongs to the layer of the longest prefix that names it.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("platform", ("socialgym.platform", "socialgym.config", "socialgym.rowops")),
    # the LLM client, prompts and reply schemas: it needs only the platform, and the LLM tie
    # scorer and the LLM annotators (round functions and the discussion substrate) call it
    ("llm client", ("socialgym.llm",)),
    # pure functions over a round
    ("round functions", ("socialgym.rewards", "socialgym.ties", "socialgym.recommenders", "socialgym.metrics",
                         "socialgym.sentiment")),
    # the PettingZoo adapters, the discussion substrate (with its annotators), the task registry
    # and the package's public entry (``socialgym.parallel_env``, ``socialgym.make``)
    ("envs", ("socialgym.envs", "socialgym.discussion", "socialgym.annotation", "socialgym.tasks", "socialgym")),
    ("policies", ("socialgym.agents", "socialgym.baselines", "socialgym.training")),
    # the format of a run directory, its readers and writers (only the platform below it is needed)
    ("run directory", ("socialgym.rundir",)),
    # the viewer reads a run directory; the experiments build viewers of their runs
    ("viewer", ("socialgym.viewer",)),
    # the experiment layer's rooms, in this order (its package entry re-exports the main API)
    ("experiments: define", ("socialgym.experiments.errors", "socialgym.experiments.define")),
    ("experiments: analysis", ("socialgym.experiments.analysis",)),
    ("experiments: run", ("socialgym.experiments.run",)),
    ("experiments: studies", ("socialgym.experiments.studies",)),
    ("experiments", ("socialgym.experiments", "socialgym.demo")),
    ("cli", ("socialgym.cli",)),
]
RANK = {prefix: rank for rank, (_, prefixes) in enumerate(LAYERS) for prefix in prefixes}

HEAVY = ("scipy.stats", "openai", "torch", "matplotlib")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES: dict[str, Path] = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def layer_of(module: str) -> int:
    name = module
    while name not in RANK:
        if "." not in name:
            raise KeyError(f"{module} is in no layer: add it to LAYERS")
        name = name.rsplit(".", 1)[0]
    return RANK[name]


def imports_of(module: str) -> set[str]:
    """The socialgym modules ``module`` imports, anywhere in its source; ``from pkg import name``
    counts as importing ``pkg.name`` when that is a module, else ``pkg``."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                found.add(f"{source}.{alias.name}" if f"{source}.{alias.name}" in MODULES else source)
    return {name for name in found if name == "socialgym" or name.startswith("socialgym.")}


GRAPH = {module: imports_of(module) - {module} for module in MODULES}


def _packages_run(imported: str, importer: str) -> list[str]:
    """The module itself and the package ``__init__``s importing it runs (root and the
    importer's own packages excepted: they are running already)."""
    parts = imported.split(".")
    chain = [".".join(parts[:i]) for i in range(2, len(parts) + 1)]
    return [name for name in chain if name in MODULES and not (importer + ".").startswith(name + ".")]


def test_every_module_has_a_layer():
    for module in MODULES:
        layer_of(module)


def test_no_import_goes_up_a_layer():
    upward = []
    for module, imported in sorted(GRAPH.items()):
        for target in sorted(imported):
            if target not in MODULES:
                upward.append(f"{module} imports {target}, which does not exist")
                continue
            for name in _packages_run(target, module) or [target]:
                if layer_of(name) > layer_of(module):
                    upward.append(f"{module} ({LAYERS[layer_of(module)][0]}) imports {name} "
                                  f"({LAYERS[layer_of(name)][0]})" + (f" via {target}" if name != target else ""))
    assert not upward, "imports from a lower layer to a higher one:\n" + "\n".join(upward)


def test_no_import_cycle():
    cycles, state = [], {}                # state: 1 on the current path, 2 finished

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(GRAPH.get(module, ())):
            if state.get(target) == 1:
                cycles.append(" -> ".join(path[path.index(target):] + [target]))
            elif target not in state and target in MODULES:
                visit(target, path + [target])
        state[module] = 2

    for module in sorted(GRAPH):
        if module not in state:
            visit(module, [module])
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


PACKAGES = {name for name, path in MODULES.items() if path.name == "__init__.py"}


def _enclosing(module: str) -> list[str]:
    """The packages that hold ``module`` (itself, when it is one), ``socialgym`` left out."""
    parts = module.split(".")
    return [p for p in (".".join(parts[:i]) for i in range(2, len(parts) + 1)) if p in PACKAGES]


def test_no_mutual_import_between_packages():
    """No two sibling packages (``socialgym.viewer`` and ``socialgym.experiments``, the rooms of
    ``socialgym.experiments``, ...) import each other, directly or through their modules."""
    uses: dict[str, set[str]] = {}
    for module, imported in GRAPH.items():
        for target in imported:
            if target not in MODULES:
                continue
            for a in _enclosing(module):
                for b in _enclosing(target):
                    if a != b and a.rpartition(".")[0] == b.rpartition(".")[0]:
                        uses.setdefault(a, set()).add(b)
    mutual = sorted(f"{a} <-> {b}" for a, targets in uses.items() for b in targets if a < b and a in uses.get(b, ()))
    assert not mutual, "sibling packages importing each other:\n" + "\n".join(mutual)


def test_import_socialgym_is_light():
    code = ("import sys, socialgym, json; "
            f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]", f"import socialgym loads {done.stdout.strip()}"


def test_config_names_every_registered_recommender():
    """config.py (platform) checks recommender and rerank names without importing the
    recommenders layer, from its own lists; they must be the registry's names."""
    from socialgym import config
    from socialgym.recommenders import registry

    assert set(config.RECOMMENDER_NAMES) == set(registry.REGISTRY)
    assert set(config.RERANK_KINDS) == set(registry.RERANKERS)
