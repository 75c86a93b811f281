"""Imports flow down: the layers of docs/architecture.md, declared as an import-linter contract in pyproject.toml,
hold; at most 15 imports run up, each listed with its reason; and no import loop spans more than 12 modules."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent

pytest.importorskip("importlinter", reason="the test extra's import-linter checks the layers")
tomllib = pytest.importorskip("tomllib", reason="Python 3.11's TOML reader reads pyproject.toml")


def _contract() -> dict:
    """The layers contract (the other one forbids importing the test oracles)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (contract,) = [c for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers"]
    return contract


def test_imports_flow_down_the_declared_layers():
    done = subprocess.run([sys.executable, "-c", "from importlinter.cli import lint_imports; "
                           "raise SystemExit(lint_imports(no_cache=True))"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"an import runs up a layer (pyproject.toml's contract):\n{done.stdout[-4000:]}"


def test_every_package_has_a_layer_and_few_imports_run_up():
    contract = _contract()
    placed = {name.strip() for layer in contract["layers"] for name in layer.split(":")}
    package = ROOT / "ember"
    tops = {f"ember.{p.stem}" for p in package.glob("*.py") if p.stem != "__init__"}
    tops |= {f"ember.{p.parent.name}" for p in package.glob("*/__init__.py")}
    assert tops <= placed, f"modules in no layer of pyproject.toml's contract: {sorted(tops - placed)}"
    assert len(contract.get("ignore_imports", [])) <= 15


def _loops(graph: dict) -> list[set]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index, low, on_stack, stack, found, counter = {}, {}, set(), [], [], [0]
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(graph[start]))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(graph[child])))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(component)
    return found


def test_no_import_loop_spans_more_than_twelve_modules():
    import grimp

    imports = grimp.build_graph("ember", cache_dir=None)
    # The package root imports every public name for `import ember as em`; nothing inside imports it back.
    graph = {m: {d for d in imports.find_modules_directly_imported_by(m) if d != "ember"} for m in imports.modules}
    largest = max(_loops(graph), key=len, default=set())
    assert len(largest) <= 12, f"an import loop of {len(largest)} modules: {sorted(largest)}"


def test_nothing_inside_the_package_imports_its_root():
    import grimp

    imports = grimp.build_graph("ember", cache_dir=None)
    importers = sorted(m for m in imports.find_modules_that_directly_import("ember") if m != "ember.__main__")
    assert not importers, f"these modules import the ember root (everything) instead of what they use: {importers}"
