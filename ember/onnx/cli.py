"""`ember export`: a zoo model, or the model of an `ember train` checkpoint, written as an ONNX file (ember.onnx.export)."""

from __future__ import annotations

import os

from ember import creation, serialization
from ember import onnx as ember_onnx
from ember.device import Device


def add_arguments(p) -> None:
    """The options of `ember export`."""
    from ember.models import list_models

    p.add_argument("ckpt", nargs="?", metavar="CKPT",
                   help="an `ember train` checkpoint (it records its model and data set) or a state dict saved by "
                   "ember.save; the ONNX file goes beside it unless --out says otherwise")
    p.add_argument("--model", metavar="NAME", help="a name from ember.models (default: the checkpoint's model; needed "
                   f"without a checkpoint or with a plain state dict): {', '.join(list_models())}")
    p.add_argument("--out", metavar="FILE", help="the ONNX file to write (default: CKPT with .onnx in place of its "
                   "extension; needed without a checkpoint)")
    p.add_argument("--input", metavar="SHAPE",
                   help="example input size, e.g. 1,3,224,224; several inputs separated by ':' (default: one sample "
                   "of the checkpoint's data set, else the model's usual input)")
    p.add_argument("--dynamic-batch", action="store_true",
                   help="make the first dimension of every input and output a named 'batch' axis")
    p.add_argument("--opset", type=int, default=18, metavar="N", help="ONNX opset version (default: 18)")
    p.add_argument("--num-classes", type=int, metavar="N",
                   help="number of classes (default: the checkpoint's, else the model's own)")
    p.add_argument("--checkpoint", metavar="FILE", help="the same as CKPT")


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


def _read_checkpoint(path: str) -> tuple[dict, dict | None]:
    """(the weights, the `ember train` settings or None) of a checkpoint or state dict file; one-line errors."""
    if os.path.isdir(path):
        raise ValueError(f"{path}: is a folder; give the checkpoint file, e.g. {os.path.join(path, 'checkpoint.safetensors')}")
    if not os.path.exists(path):
        raise ValueError(f"{path}: no such file")
    try:
        state = serialization.load(path)
    except (OSError, RuntimeError, ValueError) as e:
        msg = (getattr(e, "strerror", None) or str(e)).removeprefix(f"{path}: ")
        raise ValueError(f"{path}: {msg}") from None
    config = None
    if isinstance(state, dict) and isinstance(state.get("model"), dict):  # an `ember train` (or fit) checkpoint
        config = state.get("config") if isinstance(state.get("config"), dict) else None
        state = state["model"]
    if not isinstance(state, dict) or not all(isinstance(k, str) for k in state):
        raise ValueError(f"{path}: holds a {type(state).__name__}, not a state dict")
    if state and all(k.startswith("module.") for k in state):  # written by `ember train --nproc` (DDP's names)
        state = {k.removeprefix("module."): v for k, v in state.items()}
    return state, config


def _models_holding(weights: dict) -> list[str]:
    """The zoo models whose state dict has exactly these names (with these shapes, where some do), built on meta."""
    from ember.models import get_model, list_models

    by_names, by_shapes = [], []
    for name in list_models():
        with Device("meta"):  # shapes only: no memory for the VGGs' weights
            own = get_model(name).state_dict()
        if set(own) == set(weights):
            by_names.append(name)
            if all(tuple(own[k].shape) == tuple(getattr(weights[k], "shape", ())) for k in own):
                by_shapes.append(name)
    return by_shapes or by_names


def _mismatch(model_name: str, weights: dict, model, path: str, error: Exception) -> str:
    """One line saying why `weights` don't load into `model` (never the list of every key)."""
    holding = [n for n in _models_holding(weights) if n != model_name]
    if holding:
        names = " or ".join(holding)
        return f"--model {model_name}: {path} holds the weights of {names}, not of {model_name}; pass --model {holding[0]}"
    own = model.state_dict()
    missing, extra = [k for k in own if k not in weights], [k for k in weights if k not in own]
    if missing or extra:
        return (f"--model {model_name}: the weights in {path} don't fit {model_name}: {len(missing)} of its "
                f"{len(own)} tensors are missing (first: {missing[0] if missing else '-'}) and {len(extra)} are "
                f"not its own (first: {extra[0] if extra else '-'})")
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    details = lines[1:] or lines  # a size mismatch per tensor, after a line naming the class
    more = f" (and {len(details) - 1} more)" if len(details) > 1 else ""
    return f"--model {model_name}: the weights in {path} don't fit {model_name}: {details[0]}{more}"


def _model_and_input(args, path: str | None):
    """(the model with the checkpoint's weights, its name, the example input shapes) for export_main."""
    from ember.models import default_input_size, get_model, list_models
    from ember.train import recipe

    weights, config = _read_checkpoint(path) if path else (None, None)
    recorded = config.get("model") if config else None
    name = args.model or recorded
    if name is None:
        holding = _models_holding(weights)
        guess = f" (its weights are those of {' or '.join(holding)})" if holding else ""
        raise ValueError(f"--model: {path} holds weights but names no model, as an `ember train` checkpoint does; "
                         f"pass --model NAME{guess}")
    if name not in list_models():
        raise ValueError(f"--model {name}: unknown model; ember.models has {', '.join(list_models())}")
    if recorded is not None and name != recorded:
        raise ValueError(f"--model {name}: {path} holds {recorded} (trained by ember train on {config.get('dataset')}), "
                         f"not {name}; leave --model out to export it")
    kwargs = {} if args.num_classes is None else {"num_classes": args.num_classes}
    shapes = None
    if recorded is not None and config.get("dataset") in recipe.SAMPLE_SHAPES:  # built as ember train built it
        sample = recipe.SAMPLE_SHAPES[config["dataset"]]
        kwargs = {"num_classes": recipe.NUM_CLASSES, "in_channels": sample[0], "input_size": sample, **kwargs}
        shapes = ((1, *sample),)
    if args.input:
        shapes = _shapes(args.input)
    elif shapes is None:
        shapes = default_input_size(name)
        shapes = shapes if isinstance(shapes[0], tuple) else (shapes,)
    model = get_model(name, **kwargs)
    if weights is not None:
        try:
            model.load_state_dict(weights)
        except (RuntimeError, KeyError, ValueError) as e:
            raise ValueError(_mismatch(name, weights, model, path, e)) from None
    return model, name, shapes


def export_main(args) -> int:
    """Run `ember export`; returns the exit status."""

    if args.ckpt and args.checkpoint and args.ckpt != args.checkpoint:
        raise ValueError(f"--checkpoint {args.checkpoint}: a second checkpoint besides {args.ckpt}; give one")
    path = args.ckpt or args.checkpoint
    if path is None and args.model is None:
        raise ValueError("nothing to export: give a checkpoint (ember export runs/x/checkpoint.safetensors) or a "
                         "model (ember export --model NAME --out FILE)")
    out = args.out or (os.path.splitext(path)[0] + ".onnx" if path else None)
    if out is None:
        raise ValueError("--out FILE is needed without a checkpoint (with one, the ONNX file goes beside it)")
    model, name, shapes = _model_and_input(args, path)
    model.eval()
    dtypes = getattr(model, "input_dtypes", None) or ()
    if dtypes and len(dtypes) != len(shapes):
        raise ValueError(f"--input: {name} takes {len(dtypes)} inputs, got {len(shapes)} shapes")
    if args.dynamic_batch:  # a batch of 1 would trace as broadcastable; any size > 1 gives the same graph
        shapes = tuple((max(s[0], 2),) + tuple(s[1:]) for s in shapes)
    example = tuple(creation.zeros(s, dtype=dtypes[i]) if dtypes else creation.randn(*s) for i, s in enumerate(shapes))
    names = ["input"] if len(example) == 1 else [f"input_{i}" for i in range(len(example))]
    dynamic = {n: {0: "batch"} for n in names + ["output"]} if args.dynamic_batch else None
    proto = ember_onnx.export(model, example, out, input_names=names, output_names=["output"], dynamic_axes=dynamic,
                           opset_version=args.opset)
    import onnx

    onnx.checker.check_model(proto, full_check=True)
    n_weights = sum(int(_numel(i.dims)) for i in proto.graph.initializer)
    ins = ", ".join(f"{n}{_shape_text(i)}" for n, i in zip(names, proto.graph.input))
    print(f"wrote {out}: {name}, {len(proto.graph.node)} nodes, {n_weights:,} weights "
          f"({os.path.getsize(out) / 2**20:.1f} MiB), opset {args.opset}, inputs {ins}; onnx checker passed")
    return 0


def _numel(dims) -> int:
    n = 1
    for d in dims:
        n *= d
    return n


def _shape_text(info) -> str:
    dims = [d.dim_param or str(d.dim_value) for d in info.type.tensor_type.shape.dim]
    return f"[{', '.join(dims)}]"
