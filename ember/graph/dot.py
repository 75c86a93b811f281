"""Graph pictures: Graphviz DOT text, rendered with the `graphviz` package when it is installed."""

from __future__ import annotations

import os
import shutil
import sys

from ember.graph.ir import CAPTURE, CONSTANT, PLACEHOLDER, VARIABLE

# Fill colours by device (placement shows at a glance), with a darker border of the same hue, shapes by role.
_DEVICE_COLOURS = ["#dbe9f6", "#fde2c8", "#d9f0d3", "#eadcf0", "#fbe0e6", "#f4f1c6"]
_DEVICE_BORDERS = ["#4a7fb5", "#d9822b", "#4f9a44", "#8e5ba8", "#c2577a", "#a69b2a"]
_TRANSFER_COLOUR = "#e65100"  # send/recv pairs and the dashed edge between them
_ROLE_STYLE = {
    PLACEHOLDER: 'shape=invhouse, style="filled,bold", fillcolor="#fff2a8"',
    CAPTURE: 'shape=box, style="filled,rounded,dashed", fillcolor="#e8e8e8"',
    VARIABLE: 'shape=box, style="filled,rounded", fillcolor="#c8e6c9"',
    CONSTANT: 'shape=note, style=filled, fillcolor="#f5f5f5"',
}
_TRANSFER_SHAPE = {"send": "shape=cds", "recv": "shape=cds, orientation=180"}


def _esc(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _label(node) -> str:
    if node.kind == "op":
        title = node.op.name
        if title == "send" and "dst" in node.attrs:
            title = f"send to {node.attrs['dst']}"
        elif title == "recv" and "src" in node.attrs:
            title = f"recv from {node.attrs['src']}"
    elif node.kind == CAPTURE:
        t = node.attrs["tensor"]
        title = "parameter" if type(t).__name__ == "Parameter" or t.requires_grad else "captured"
    else:
        title = node.kind
    if node.name:
        title = f"{node.name}\n{title}" if node.kind != "op" else f"{title}\n{node.name}"
    specs = "\n".join(v.spec_str() for v in node.outputs)
    return f"%{node.id} {title}" + (f"\n{specs}" if specs else "")


def _device(node) -> str:
    return str(node.outputs[0].device) if node.outputs else "cpu"


def _is_transfer(node) -> bool:
    return node.kind == "op" and node.op.name in _TRANSFER_SHAPE


def to_dot(graph, outputs=None) -> str:
    """DOT text: nodes show op and output shape, coloured by device; send/recv pairs are joined by a dashed edge."""
    nodes = graph.needed_for(outputs) if outputs is not None else graph.nodes
    if outputs is not None:
        out_ids = {v.node.id for v in outputs}
    else:  # without named outputs, the ops nothing else reads are the outputs
        used = {x.node.id for n in nodes for x in n.value_inputs()}
        out_ids = {n.id for n in nodes if n.id not in used and n.kind == "op"}
    devices: dict = {}  # device name -> palette index, in order of first appearance
    for n in nodes:
        devices.setdefault(_device(n), len(devices) % len(_DEVICE_COLOURS))
    placed = len(devices) > 1
    lines = [f'digraph "{_esc(graph.name)}" {{', "  rankdir=TB;", '  node [fontname="Helvetica", fontsize=10];']
    for n in nodes:
        k = devices[_device(n)]
        fill, border = _DEVICE_COLOURS[k], _DEVICE_BORDERS[k]
        if _is_transfer(n):
            style = (f'{_TRANSFER_SHAPE[n.op.name]}, style="filled,bold", fillcolor="{fill}", '
                     f'color="{_TRANSFER_COLOUR}", penwidth=2')
        elif n.kind in _ROLE_STYLE:
            style = _ROLE_STYLE[n.kind] + (f', color="{border}", penwidth=2' if placed else "")
        else:
            style = f'shape=box, style="filled,rounded", fillcolor="{fill}"' + (f', color="{border}"' if placed else "")
        if n.id in out_ids:
            style += ", peripheries=2" + ("" if "penwidth" in style else ", penwidth=1.5")
        lines.append(f'  n{n.id} [label="{_esc(_label(n))}", {style}];')
    for n in nodes:
        for x in n.inputs:
            if hasattr(x, "node") and x.node.graph is graph:
                if n.kind == "op" and n.op.name == "recv" and _is_transfer(x.node):
                    key = _esc(str(n.attrs.get("key", "")))
                    lines.append(f'  n{x.node.id} -> n{n.id} [style=dashed, color="{_TRANSFER_COLOUR}", penwidth=1.5, '
                                 f'label="{key}", fontsize=8, fontcolor="{_TRANSFER_COLOUR}"];')
                else:
                    lines.append(f"  n{x.node.id} -> n{n.id};")
        for c in n.control_inputs:
            lines.append(f"  n{c.id} -> n{n.id} [style=dashed, arrowhead=odot];")
    if placed:
        rows = "".join(
            f'<tr><td bgcolor="{_DEVICE_COLOURS[k]}" color="{_DEVICE_BORDERS[k]}">{_esc(d)}</td></tr>'
            for d, k in devices.items()
        )
        lines.append(
            '  legend [shape=plaintext, label=<<table border="0" cellborder="1" cellspacing="2">'
            f"<tr><td><b>devices</b></td></tr>{rows}</table>>];"
        )
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
