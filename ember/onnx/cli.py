"""`ember export`: build a zoo model and write it as an ONNX file (the command line of ember.onnx.export)."""

from __future__ import annotations

import os


def add_arguments(p) -> None:
    """The options of `ember export`."""
    from ember.models import list_models

    p.add_argument("--model", required=True, metavar="NAME", help=f"a name from ember.models: {', '.join(list_models())}")
    p.add_argument("--out", required=True, metavar="FILE", help="the ONNX file to write")
    p.add_argument("--input", metavar="SHAPE",
                   help="example input size, e.g. 1,3,224,224; several inputs separated by ':' (default: the "
                   "model's usual input)")
    p.add_argument("--dynamic-batch", action="store_true",
                   help="make the first dimension of every input and output a named 'batch' axis")
    p.add_argument("--opset", type=int, default=18, metavar="N", help="ONNX opset version (default: 18)")
    p.add_argument("--num-classes", type=int, metavar="N", help="number of classes (default: the model's own)")
    p.add_argument("--checkpoint", metavar="FILE",
                   help="load these weights first: an `ember train` checkpoint or a state dict saved by ember.save")


def _shapes(text: str) -> tuple:
    shapes = []
    for part in text.split(":"):
        try:
            shape = tuple(int(d) for d in part.split(","))
        except ValueError:
            shape = ()
        if not shape or any(d < 1 for d in shape):
            raise ValueError(f"--input {text}: expected positive integers separated by commas (inputs separated by "
                             "':'), e.g. 1,3,224,224")
        shapes.append(shape)
    return tuple(shapes)


def _load_weights(model, path: str) -> None:
    import ember as em

    state = em.load(path)
    if isinstance(state, dict) and isinstance(state.get("model"), dict):
        state = state["model"]  # an `ember train` checkpoint
    if not isinstance(state, dict):
        raise ValueError(f"--checkpoint {path}: holds a {type(state).__name__}, not a state dict")
    model.load_state_dict(state)


def export_main(args) -> int:
    """Run `ember export`; returns the exit status."""
    import ember as em
    from ember.models import default_input_size, get_model, list_models

    if args.model not in list_models():
        raise ValueError(f"--model {args.model}: unknown model; ember.models has {', '.join(list_models())}")
    kwargs = {} if args.num_classes is None else {"num_classes": args.num_classes}
    shapes = _shapes(args.input) if args.input else default_input_size(args.model)
    shapes = shapes if isinstance(shapes[0], tuple) else (shapes,)
    model = get_model(args.model, **kwargs)
    if args.checkpoint:
        _load_weights(model, args.checkpoint)
    model.eval()
    dtypes = getattr(model, "input_dtypes", None) or ()
    if dtypes and len(dtypes) != len(shapes):
        raise ValueError(f"--input: {args.model} takes {len(dtypes)} inputs, got {len(shapes)} shapes")
    if args.dynamic_batch:  # a batch of 1 would trace as broadcastable; any size > 1 gives the same graph
        shapes = tuple((max(s[0], 2),) + tuple(s[1:]) for s in shapes)
    example = tuple(em.zeros(s, dtype=dtypes[i]) if dtypes else em.randn(*s) for i, s in enumerate(shapes))
    names = ["input"] if len(example) == 1 else [f"input_{i}" for i in range(len(example))]
    dynamic = {n: {0: "batch"} for n in names + ["output"]} if args.dynamic_batch else None
    proto = em.onnx.export(model, example, args.out, input_names=names, output_names=["output"], dynamic_axes=dynamic,
                           opset_version=args.opset)
    import onnx

    onnx.checker.check_model(proto, full_check=True)
    n_weights = sum(int(_numel(i.dims)) for i in proto.graph.initializer)
    ins = ", ".join(f"{n}{_shape_text(i)}" for n, i in zip(names, proto.graph.input))
    print(f"wrote {args.out}: {len(proto.graph.node)} nodes, {n_weights:,} weights "
          f"({os.path.getsize(args.out) / 2**20:.1f} MiB), opset {args.opset}, inputs {ins}; onnx checker passed")
    return 0


def _numel(dims) -> int:
    n = 1
    for d in dims:
        n *= d
    return n


def _shape_text(info) -> str:
    dims = [d.dim_param or str(d.dim_value) for d in info.type.tensor_type.shape.dim]
    return f"[{', '.join(dims)}]"
