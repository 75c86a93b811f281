"""Graph pictures: Graphviz DOT text, rendered with the `graphviz` package when it is installed."""

from __future__ import annotations

import os
import shutil
import sys

from ember.graph.ir import CAPTURE, CONSTANT, PLACEHOLDER, VARIABLE

# Fill colours by device (placement shows at a glance), shapes by role.
_DEVICE_COLOURS = ["#dbe9f6", "#fde2c8", "#d9f0d3", "#eadcf0", "#fbe0e6", "#f4f1c6"]
_ROLE_STYLE = {
    PLACEHOLDER: 'shape=invhouse, style="filled,bold", fillcolor="#fff2a8"',
    CAPTURE: 'shape=box, style="filled,rounded,dashed", fillcolor="#e8e8e8"',
    VARIABLE: 'shape=box, style="filled,rounded", fillcolor="#c8e6c9"',
    CONSTANT: 'shape=note, style=filled, fillcolor="#f5f5f5"',
}


def _esc(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _label(node) -> str:
    if node.kind == "op":
        title = node.op.name
    elif node.kind == CAPTURE:
        t = node.attrs["tensor"]
        title = "parameter" if type(t).__name__ == "Parameter" or t.requires_grad else "captured"
    else:
        title = node.kind
    if node.name:
        title = f"{node.name}\n{title}" if node.kind != "op" else f"{title}\n{node.name}"
    specs = "\n".join(v.spec_str() for v in node.outputs)
    return f"%{node.id} {title}" + (f"\n{specs}" if specs else "")


def to_dot(graph, outputs=None) -> str:
    """DOT text: nodes show op and output shape; inputs, parameters and outputs look different."""
    nodes = graph.needed_for(outputs) if outputs is not None else graph.nodes
    if outputs is not None:
        out_ids = {v.node.id for v in outputs}
    else:  # without named outputs, the ops nothing else reads are the outputs
        used = {x.node.id for n in nodes for x in n.value_inputs()}
        out_ids = {n.id for n in nodes if n.id not in used and n.kind == "op"}
    devices: dict = {}
    lines = [f'digraph "{_esc(graph.name)}" {{', "  rankdir=TB;", '  node [fontname="Helvetica", fontsize=10];']
    for n in nodes:
        dev = str(n.outputs[0].device) if n.outputs else "cpu"
        colour = devices.setdefault(dev, _DEVICE_COLOURS[len(devices) % len(_DEVICE_COLOURS)])
        style = _ROLE_STYLE.get(n.kind, f'shape=box, style="filled,rounded", fillcolor="{colour}"')
        if n.kind == "op" and n.op.name in ("send", "recv"):
            style = 'shape=cds, style=filled, fillcolor="#ffd54f"'
        if n.id in out_ids:
            style += ", peripheries=2, penwidth=1.5"
        lines.append(f'  n{n.id} [label="{_esc(_label(n))}", {style}];')
    for n in nodes:
        for x in n.inputs:
            if hasattr(x, "node") and x.node.graph is graph:
                lines.append(f"  n{x.node.id} -> n{n.id};")
        for c in n.control_inputs:
            lines.append(f"  n{c.id} -> n{n.id} [style=dashed, arrowhead=odot];")
    if len(devices) > 1:
        legend = "\\l".join(f"{d}" for d in devices) + "\\l"
        lines.append(f'  legend [shape=plaintext, label="devices:\\l{legend}"];')
    lines.append("}")
    return "\n".join(lines)


def render(graph, path: str, outputs=None, format: str | None = None) -> str:
    """Write the picture to `path` (.svg/.png/...); without Graphviz, write `path`.dot and say how."""
    text = to_dot(graph, outputs)
    base, ext = os.path.splitext(path)
    fmt = (format or ext.lstrip(".") or "svg").lower()
    if fmt == "dot":
        with open(path, "w") as f:
            f.write(text)
        return path
    dot_path = base + ".dot"
    try:
        import graphviz  # optional `graph` extra
    except ImportError:
        graphviz = None
    if graphviz is None or shutil.which("dot") is None:
        with open(dot_path, "w") as f:
            f.write(text)
        missing = "the graphviz Python package" if graphviz is None else "the Graphviz 'dot' program"
        print(
            f"{missing} is not installed: wrote {dot_path}; render it with `dot -T{fmt} {dot_path} -o {path}` "
            "(install Graphviz, e.g. `apt-get install graphviz`, and `pip install ember[graph]`)",
            file=sys.stderr,
        )
        return dot_path
    src = graphviz.Source(text)
    out = src.render(outfile=path, format=fmt, cleanup=True)
    return out
