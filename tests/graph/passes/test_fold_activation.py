"""fold_activation: an eval batch norm's relu or two-sided clamp joins channel_affine's pass, with the values
of the unfolded graph bit for bit (both kernels: NumPy below 16K values, compiled above)."""

import numpy as np
import pytest
from passes_util import run, run_optimized, sym, values

from ember.graph import Graph
from ember.graph.passes import optimize
from ember.ops.channel_affine import channel_affine

RNG = np.random.default_rng(3)


def _inputs(shape, dtype):
    x = RNG.standard_normal(shape).astype(dtype) * 4
    flat = x.reshape(-1)
    flat[:4] = [np.nan, -0.0, 0.0, 6.0]  # NaN kept; the zeros' signs and the bounds as the activation gives them
    c = shape[1]
    return x, RNG.standard_normal(c).astype(dtype), RNG.standard_normal(c).astype(dtype) * 0.1


def _graph(shape, dtype, activation):
    g = Graph()
    x, s, b = sym(g, shape, dtype, name="x"), sym(g, (shape[1],), dtype, name="s"), sym(g, (shape[1],), dtype, name="b")
    y = channel_affine(x, s, b)
    return g, (x, s, b), activation(y)


ACTIVATIONS = {"relu": lambda y: y.relu(), "relu6": lambda y: y.clamp(0, 6), "hardtanh": lambda y: y.clamp(-1.0, 1.0)}


@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (2, 8, 40, 40)])  # NumPy path, compiled path
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_activation_joins_the_affine_pass_with_the_same_values(shape, dtype, name):
    g, (x, s, b), y = _graph(shape, dtype, ACTIVATIONS[name])
    opt = optimize(g, values(y), ["fusion"])
    ops = [n.op_name for n in opt.graph.nodes if n.kind == "op"]
    assert ops == ["channel_affine"]
    xv, sv, bv = _inputs(shape, dtype)
    feeds = {x._data: xv, s._data: sv, b._data: bv}
    want = run(g, values(y), feeds)[0]
    got = run_optimized(g, values(y), feeds, ["fusion"])[0][0]
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    np.testing.assert_array_equal(got, want)


def test_not_folded_when_the_affine_value_is_read_elsewhere_or_the_clamp_is_one_sided():
    g, (x, s, b), _ = _graph((2, 3, 4, 5), np.float32, lambda y: y)
    y = channel_affine(x, s, b)
    twice = values(y.relu(), y * 2)  # the batch norm's value is read twice
    one_sided = values(channel_affine(x, s, b).clamp(min=0))
    for outs in (twice, one_sided):
        ops = [n.op_name for n in optimize(g, outs, ["fusion"]).graph.nodes if n.kind == "op"]
        assert any(op in ("relu", "clamp", "fused_elementwise") for op in ops), ops


def _residual_graph(shape, dtype, activation, shortcut_first=True):
    """channel_affine(x) + r -> activation; r = shortcut(z) made before the affine (or after, as a strided block's
    traced shortcut is)."""
    g = Graph()
    x, s, b = sym(g, shape, dtype, name="x"), sym(g, (shape[1],), dtype, name="s"), sym(g, (shape[1],), dtype, name="b")
    z = sym(g, shape, dtype, name="z")
    r = z * 2 if shortcut_first else None
    y = channel_affine(x, s, b)
    if r is None:
        r = z * 2
    return g, (x, s, b, z), activation(y + r)


@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (2, 8, 40, 40)])  # NumPy path, compiled path
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", ["relu", "none"])
def test_an_eval_batch_norms_residual_add_and_relu_join_its_pass_with_the_same_values(shape, dtype, name):
    """channel_affine + a same-shape value + relu (a residual block's eval batch norm) is one node, with the values of
    the unfolded graph bit for bit: NaN, inf, -0.0 and sums that cancel exactly."""
    activation = ACTIVATIONS.get(name, lambda y: y)
    g, (x, s, b, z), y = _residual_graph(shape, dtype, activation)
    opt = optimize(g, values(y), ["fusion"])
    ops = [n.op_name for n in opt.graph.nodes if n.kind == "op"]
    assert ops.count("channel_affine") == 1 and not {"add", "relu"} & set(ops), ops
    xv, sv, bv = _inputs(shape, dtype)
    zv = RNG.standard_normal(shape).astype(dtype)
    zv.reshape(-1)[4:8] = [np.inf, -np.inf, -0.0, np.nan]
    zv.reshape(-1)[8] = -(xv.reshape(-1)[8] * sv[0] + bv[0]) / 2  # 2z cancels the affine's value exactly
    feeds = {x._data: xv, s._data: sv, b._data: bv, z._data: zv}
    want = run(g, values(y), feeds)[0]
    got = run_optimized(g, values(y), feeds, ["fusion"])[0][0]
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    np.testing.assert_array_equal(got, want)


def test_a_residual_made_after_the_batch_norm_or_broadcast_is_not_joined():
    g, _, y = _residual_graph((2, 8, 40, 40), np.float32, ACTIVATIONS["relu"], shortcut_first=False)
    ops = [n.op_name for n in optimize(g, values(y), ["fusion"]).graph.nodes if n.kind == "op"]
    assert "fused_elementwise" in ops or "add" in ops, ops
    g = Graph()
    x, s, b = sym(g, (2, 8, 40, 40), np.float32), sym(g, (8,), np.float32), sym(g, (8,), np.float32)
    row = sym(g, (40,), np.float32)
    y = (channel_affine(x, s, b) + row).relu()  # broadcast: not the output's shape
    ops = [n.op_name for n in optimize(g, values(y), ["fusion"]).graph.nodes if n.kind == "op"]
    assert "fused_elementwise" in ops or "add" in ops, ops


@pytest.mark.parametrize("compiled", [True, False])
def test_channel_affine_with_a_residual_kernel_gives_the_unfolded_values(compiled, monkeypatch):
    import ember.ops.channel_affine  # noqa: F401  (registers channel_affine)
    from ember.errors import ShapeError
    from ember.kernels import batch_norm as kernels
    from ember.op import OPS

    if not compiled:
        monkeypatch.setattr(kernels, "_kernel", lambda name, dtype: None)
    ca = OPS["channel_affine"]
    for shape in [(1, 64, 16, 16), (2, 128, 8, 8)]:
        x, s, b = _inputs(shape, np.float32)
        r = RNG.standard_normal(shape).astype(np.float32)
        for activation in (None, ("relu",)):
            want = OPS["add"].kernel(np, ca.kernel(np, x, s, b), r)
            want = want if activation is None else OPS["relu"].kernel(np, want)
            np.testing.assert_array_equal(ca.kernel(np, x, s, b, r, activation=activation), want)
    with pytest.raises(ShapeError, match=r"channel_affine: the residual .* with a scale and a shift"):
        ca.infer(x, None, b, r)


def test_jitted_eval_residual_blocks_equal_eager_as_their_state_changes():
    """Identity shortcuts in eval mode: each block's second batch norm adds the shortcut and applies relu in its pass
    (no add, relu or fused elementwise kernel runs), equal to eager call after call."""
    import ember as em
    from ember.models.cifar_resnet import CifarBasicBlock

    em.manual_seed(0)
    model = em.nn.Sequential(CifarBasicBlock(8, 8), CifarBasicBlock(8, 8)).eval()

    def change_weights():
        model[0].bn2.weight.mul_(-1.5)
        model[1].bn2.bias.add_(0.2)

    def check_events(call, names):
        if call < 4:
            assert not {"add", "relu", "fused_elementwise"} & set(names), names

    _jitted_eval_equals_eager_as_state_changes(model, em.randn(2, 8, 40, 40), model[0].bn2, change_weights,
                                               check_events)


def _jitted_eval_equals_eager_as_state_changes(model, x, bn, change_weights, check_events):
    """A jitted eval-mode `model` equals eager bit for bit call after call while the user changes batch norm `bn`'s
    running statistics (call 1), weights (change_weights, call 2) and the input in place (call 3), and switches
    to training mode (call 4); check_events(call, names) sees the jitted call's profiled kernel names."""
    import ember as em

    jitted = em.jit(lambda t: model(t))
    with em.no_grad():
        for call in range(5):
            if call == 1:
                bn.running_mean.add_(0.3)
                bn.running_var.mul_(2.0)
            if call == 2:
                change_weights()
            if call == 3:
                x.mul_(3.0)
            if call == 4:
                model.train()  # batch statistics: nothing to fold, and the mode is part of the jit's key
            want = model(x).numpy()
            with em.profiler.profile() as prof:
                got = jitted(x).numpy()
            np.testing.assert_array_equal(got, want, err_msg=f"call {call}")
            check_events(call, [e.name for e in prof.events if e.cat != "range"])


def test_jitted_network_with_folded_activations_equals_eager_as_its_state_changes():
    """Conv -> batch norm -> ReLU6 / ReLU, the activations folded into the batch norms' passes in eval mode."""
    import ember as em

    em.manual_seed(0)
    nn = em.nn
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU6(),
                          nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU()).eval()

    def change_weights():
        model[1].weight.mul_(-1.5)
        model[4].bias.add_(0.2)

    def check_events(call, names):
        if call < 4:
            assert "clamp" not in names and "relu" not in names, names

    # 25.6K values per activation: the compiled pass
    _jitted_eval_equals_eager_as_state_changes(model, em.randn(2, 3, 40, 40), model[1], change_weights, check_events)


def test_conv_bias_and_relu_are_one_pass_in_a_jitted_training_step_equal_to_eager():
    """A convolution's bias is channel_affine with a shift alone, so in training the ReLU after it joins the bias's
    pass too (its gradient reads the ReLU's output, never the sum before it). A jitted SGD step equals eager step
    after step while the learning rate, the input (in place) and a weight (in place) change between steps."""
    import ember as em

    def build():
        nn = em.nn
        return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 4, 3), nn.ReLU(), nn.Flatten(),
                             nn.Linear(4 * 38 * 38, 5))

    x, y = em.randn(2, 3, 40, 40), em.tensor([1, 3])  # 25.6K values per activation: the compiled pass
    _jitted_training_equals_eager(build, x, y, changed_weight=lambda m: m[0].weight, scale=0.5,
                                  absent=("relu", "add"), profiled_from=0)


@pytest.mark.parametrize("shape", [(4, 3, 5), (6, 8, 48, 48), (64, 5)])  # NumPy path, compiled path, (N, C) rows
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_training_batch_norm_kernels_with_relu_give_the_unfolded_values(shape, dtype):
    """batch_norm with activation relu equals relu(batch_norm(x)), and batch_norm_backward with relu_out equals
    batch_norm_backward(relu_backward(g, relu_out)), bit for bit: NaN, -0.0 and exact zeros in the relu output
    (NaN passes the gradient, zeros stop it) and statistics gradients included."""
    import ember.ops.nn_extra  # noqa: F401  (registers batch_norm and its backward)
    from ember.op import OPS

    rng = np.random.default_rng(7)
    c = shape[1]
    x = (rng.standard_normal(shape) * 3).astype(dtype)
    w, b = rng.standard_normal(c).astype(dtype), rng.standard_normal(c).astype(dtype)
    bn, bwd = OPS["batch_norm"], OPS["batch_norm_backward"]
    y, mean, var = bn.kernel(np, x, w, b, eps=1e-5)
    fy, fmean, fvar = bn.kernel(np, x, w, b, eps=1e-5, activation=("relu",))
    relu_y = OPS["relu"].kernel(np, y)
    np.testing.assert_array_equal(fy, relu_y)
    for activation, want in ((None, y), (("relu",), relu_y)):  # into a plan's buffer
        np.testing.assert_array_equal(bn.kernel_out(np, x, w, b, eps=1e-5, activation=activation,
                                                    out=np.full(shape, 7, dtype))[0], want)
    np.testing.assert_array_equal(np.signbit(fy), np.signbit(relu_y))
    np.testing.assert_array_equal(fmean, mean)
    np.testing.assert_array_equal(fvar, var)

    g = rng.standard_normal(shape).astype(dtype)
    out = relu_y.copy()
    flat = out.reshape(-1)
    flat[:3] = [np.nan, -0.0, 0.0]
    gmean, gvar = rng.standard_normal(c).astype(dtype), rng.standard_normal(c).astype(dtype)
    for stats in ((None, None), (gmean, gvar)):
        want = bwd.kernel(np, x, w, mean, var, OPS["relu_backward"].kernel(np, g, out), *stats, eps=1e-5)
        got = bwd.kernel(np, x, w, mean, var, g, *stats, out, eps=1e-5)
        for a, e in zip(got, want):
            np.testing.assert_array_equal(a, e)


@pytest.mark.parametrize("shape", [(4, 3, 5), (6, 8, 48, 48), (64, 5)])  # small, threads' channel split, (N, C) rows
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize("activation", [("relu",), None])
def test_training_batch_norm_with_a_residual_gives_the_unfolded_values(shape, dtype, compiled, activation,
                                                                       monkeypatch):
    """batch_norm with a residual input equals relu(batch_norm(x) + residual) (or the sum alone) bit for bit, its
    statistics too: NaN, inf, -0.0 and a residual that cancels the output exactly, compiled and NumPy kernels."""
    import ember.ops.nn_extra  # noqa: F401  (registers batch_norm)
    from ember.errors import ShapeError
    from ember.kernels import batch_norm as kernels
    from ember.op import OPS

    if not compiled:
        monkeypatch.setattr(kernels, "_kernel", lambda name, dtype: None)
    rng = np.random.default_rng(11)
    c = shape[1]
    x = (rng.standard_normal(shape) * 3).astype(dtype)
    w, b = rng.standard_normal(c).astype(dtype), rng.standard_normal(c).astype(dtype)
    bn = OPS["batch_norm"]
    y, mean, var = bn.kernel(np, x, w, b, eps=1e-5)
    r = rng.standard_normal(shape).astype(dtype)
    flat = r.reshape(-1)
    flat[:4] = [np.nan, np.inf, -0.0, -np.inf]
    flat[4:6] = -y.reshape(-1)[4:6]  # sums of exactly zero: relu's zero, not a sign from the rounding order
    want = OPS["add"].kernel(np, y, r)
    if activation is not None:
        want = OPS["relu"].kernel(np, want)
    out = np.full(shape, 7, dtype)  # a plan's buffer (kernel_out), written over whole
    for got, gmean, gvar in (bn.kernel(np, x, w, b, r, eps=1e-5, activation=activation),
                             bn.kernel_out(np, x, w, b, r, eps=1e-5, activation=activation, out=out)):
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
        np.testing.assert_array_equal(gmean, mean)
        np.testing.assert_array_equal(gvar, var)
    assert got is out
    with pytest.raises(ShapeError, match=r"batch_norm: the residual .* must be the input's shape"):
        bn.infer(x, w, b, r[:1], eps=1e-5)


def test_a_residual_blocks_batch_norm_add_and_relu_are_one_pass_and_a_jitted_step_equals_eager():
    """conv -> BN -> ReLU -> conv -> BN, + shortcut, -> ReLU (identity and projection shortcuts), trained: the jitted
    graph's second batch norms take the shortcut and the relu (a projection shortcut's own batch norm is not folded
    twice), and the step equals eager bit for bit step after step while its state changes."""
    import ember as em
    from ember.models.cifar_resnet import CifarBasicBlock

    def build():
        nn = em.nn
        return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                             CifarBasicBlock(8, 8), CifarBasicBlock(8, 16, shortcut="B"),
                             nn.Flatten(), nn.Linear(16 * 24 * 24, 5))

    em.manual_seed(0)
    model = build()
    step = em.jit(lambda x, y: em.nn.functional.cross_entropy(model(x), y).backward())
    x, y = em.randn(6, 3, 24, 24), em.tensor([1, 3, 0, 4, 2, 1])
    graph = step.lower(x, y, optimized=True)
    norms = [(len(n.inputs), n.attrs.get("activation")) for n in graph.nodes if n.kind == "op" and n.op.name == "batch_norm"]
    assert sorted(norms, key=str) == sorted([(3, ("relu",))] * 3 + [(4, ("relu",))] * 2 + [(3, None)], key=str), norms
    _jitted_training_equals_eager(build, x, y, changed_weight=lambda m: m[3].bn2.weight, scale=-0.5, absent=(),
                                  profiled_from=2)


def test_relu_after_a_training_batch_norm_joins_its_passes_both_ways_and_a_jitted_step_equals_eager():
    """conv -> BatchNorm2d -> ReLU, trained: the jitted step runs no relu and no relu_backward kernels (the batch
    norm's passes do their work), and equals eager bit for bit step after step while the learning rate, the input
    (in place) and a batch-norm weight (in place) change, including the running statistics."""
    import ember as em

    def build():
        nn = em.nn
        return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                             nn.Conv2d(8, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                             nn.Flatten(), nn.Linear(8 * 24 * 24, 5))

    x, y = em.randn(6, 3, 24, 24), em.tensor([1, 3, 0, 4, 2, 1])  # 27.6K values per activation: compiled passes
    _jitted_training_equals_eager(build, x, y, changed_weight=lambda m: m[1].weight, scale=-0.5,
                                  absent=("relu", "relu_backward"), profiled_from=2)  # the first calls trace


def _jitted_training_equals_eager(build, x, y, changed_weight, scale, absent, profiled_from):
    """Six SGD steps of `build()`'s model, eager and jitted from the same seed, equal bit for bit in the loss and
    the whole state (parameters and buffers) after every step, while the learning rate (step 2), the input in
    place (step 3) and a weight in place (step 4) change; from step `profiled_from` the jitted step runs no
    kernel named in `absent`."""
    import ember as em

    def make():
        em.manual_seed(0)
        model = build()
        opt = em.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

        def step(x, y):
            opt.zero_grad()
            loss = em.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss

        return model, opt, step

    (m1, o1, eager), (m2, o2, step2) = make(), make()
    jitted = em.jit(step2)
    for i in range(6):
        if i == 2:
            for o in (o1, o2):
                o.param_groups[0]["lr"] = 0.003
        if i == 3:
            x.mul_(-2.0)
        if i == 4:
            with em.no_grad():
                changed_weight(m1).mul_(scale)
                changed_weight(m2).mul_(scale)
        want = eager(x, y).item()
        with em.profiler.profile() as prof:
            got = jitted(x, y).item()
        assert got == want, f"step {i}"
        for (name, p), q in zip(m1.state_dict().items(), m2.state_dict().values()):
            np.testing.assert_array_equal(q.numpy(), p.numpy(), err_msg=f"step {i}: {name}")
        if i >= profiled_from:
            names = [e.name for e in prof.events if e.cat != "range"]
            assert not set(absent) & set(names), names


def _depthwise_graph(shape, dtype, activation, stride=1, multiplier=1, groups=None):
    from ember.ops.conv import conv2d

    g = Graph()
    c = shape[1]
    groups = c if groups is None else groups
    x = sym(g, shape, dtype, name="x")
    w = sym(g, (c * multiplier, c // groups, 3, 3), dtype, name="w")
    s, b = sym(g, (c * multiplier,), dtype, name="s"), sym(g, (c * multiplier,), dtype, name="b")
    y = activation(channel_affine(conv2d(x, w, None, stride, 1, 1, groups), s, b))
    return g, (x, w, s, b), y


def _depthwise_feeds(placeholders, shape, dtype, multiplier=1, groups=None):
    x, w, s, b = placeholders
    xv, sv, bv = _inputs(shape, dtype)
    c = shape[1]
    wv = RNG.standard_normal((c * multiplier, c // (c if groups is None else groups), 3, 3)).astype(dtype)
    sv, bv = np.tile(sv, multiplier), np.tile(bv, multiplier)
    return {x._data: xv, w._data: wv, s._data: sv, b._data: bv}


@pytest.mark.parametrize("shape", [(1, 4, 6, 6), (2, 8, 40, 40)])  # the two ops' kernels, the compiled epilogue
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", ["none", *ACTIVATIONS])
@pytest.mark.parametrize("stride,multiplier", [(1, 1), (2, 1), (1, 2)])
def test_a_depthwise_conv_and_its_affine_are_one_node_with_the_same_values(shape, dtype, name, stride, multiplier):
    activation = ACTIVATIONS.get(name, lambda y: y)
    g, placeholders, y = _depthwise_graph(shape, dtype, activation, stride, multiplier)
    opt = optimize(g, values(y), ["fusion"])
    assert [n.op_name for n in opt.graph.nodes if n.kind == "op"] == ["conv2d_affine"]
    feeds = _depthwise_feeds(placeholders, shape, dtype, multiplier)
    want = run(g, values(y), feeds)[0]
    got = run_optimized(g, values(y), feeds, ["fusion"])[0][0]
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    np.testing.assert_array_equal(got, want)


def _pointwise_graph(shape, out_channels, dtype, activation):
    from ember.ops.conv import conv2d

    g = Graph()
    x = sym(g, shape, dtype, name="x")
    w = sym(g, (out_channels, shape[1], 1, 1), dtype, name="w")
    s, b = sym(g, (out_channels,), dtype, name="s"), sym(g, (out_channels,), dtype, name="b")
    return g, (x, w, s, b), activation(channel_affine(conv2d(x, w, None, 1, 0, 1, 1), s, b))


@pytest.mark.parametrize("shape,out_channels", [
    ((1, 16, 28, 28), 96),    # a single sample, one chunk
    ((1, 320, 7, 7), 1280),   # MobileNetV2's last layer: the GEMM split by rows
    ((1, 96, 56, 56), 24),    # few output channels: split by columns
    ((4, 64, 32, 32), 64),    # a batch: split by samples
    ((3, 24, 16, 16), 40),    # a batch of 256-pixel maps, one chunk
    ((1, 4, 5, 5), 3),        # too small for Ember's GEMM: the two ops' kernels
])
@pytest.mark.parametrize("name", ["none", *ACTIVATIONS])
def test_a_pointwise_conv_and_its_affine_are_one_node_with_the_same_values(shape, out_channels, name):
    activation = ACTIVATIONS.get(name, lambda y: y)
    g, (x, w, s, b), y = _pointwise_graph(shape, out_channels, np.float32, activation)
    opt = optimize(g, values(y), ["fusion"])
    assert [n.op_name for n in opt.graph.nodes if n.kind == "op"] == ["conv2d_affine"]
    xv, _, _ = _inputs(shape, np.float32)
    feeds = {x._data: xv, w._data: RNG.standard_normal((out_channels, shape[1], 1, 1)).astype(np.float32),
             s._data: RNG.standard_normal(out_channels).astype(np.float32),
             b._data: RNG.standard_normal(out_channels).astype(np.float32)}
    want = run(g, values(y), feeds)[0]
    got = run_optimized(g, values(y), feeds, ["fusion"])[0][0]
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("shape,dtype", [((4, 16, 8, 8), np.float32), ((1, 16, 28, 28), np.float64)])
def test_a_pointwise_conv_conv2d_runs_by_patches_or_in_float64_is_not_joined(shape, dtype):
    """A batch of small maps goes through conv2d's patches (one GEMM for the batch), float64 through NumPy: no kernel
    would join the affine to them."""
    g, _, y = _pointwise_graph(shape, 8, dtype, lambda v: v)
    ops = [n.op_name for n in optimize(g, values(y), ["fusion"]).graph.nodes if n.kind == "op"]
    assert "conv2d_affine" not in ops and "conv2d" in ops, ops


def test_a_depthwise_conv_read_twice_a_grouped_conv_and_a_shift_alone_are_not_joined():
    from ember.ops.conv import conv2d

    shape = (1, 4, 6, 6)

    cases = []
    g = Graph()
    x, w = sym(g, shape, name="x"), sym(g, (4, 1, 3, 3), name="w")
    s, b = sym(g, (4,), name="s"), sym(g, (4,), name="b")
    conv = conv2d(x, w, None, 1, 1, 1, 4)
    cases.append((g, values(channel_affine(conv, s, b).relu(), conv * 2)))  # the convolution's value read twice
    g = Graph()
    x, w, b = sym(g, shape, name="x"), sym(g, (4, 1, 3, 3), name="w"), sym(g, (4,), name="b")
    cases.append((g, values(channel_affine(conv2d(x, w, None, 1, 1, 1, 4), None, b))))  # a shift alone: a bias
    g2, _, grouped = _depthwise_graph(shape, np.float32, lambda y: y, groups=2)
    cases.append((g2, values(grouped)))  # two channels a group
    for graph, outs in cases:
        ops = [n.op_name for n in optimize(graph, outs, ["fusion"]).graph.nodes if n.kind == "op"]
        assert "conv2d_affine" not in ops and "conv2d" in ops, ops


def test_the_joined_op_without_the_compiled_kernel_gives_the_same_values(monkeypatch):
    from ember.kernels.conv import depthwise

    shape, dtype = (2, 8, 40, 40), np.float32
    g, placeholders, y = _depthwise_graph(shape, dtype, ACTIVATIONS["relu6"])
    feeds = _depthwise_feeds(placeholders, shape, dtype)
    monkeypatch.setattr(depthwise, "kernel_for", lambda *a, **k: None)  # the NumPy convolution, both ways
    got, graph = run_optimized(g, values(y), feeds, ["fusion"])
    assert [n.op_name for n in graph.nodes if n.kind == "op"] == ["conv2d_affine"]
    np.testing.assert_array_equal(got[0], run(g, values(y), feeds)[0])


def test_the_joined_op_matches_torch():
    torch = pytest.importorskip("torch")
    shape, dtype = (2, 8, 40, 40), np.float32
    g, placeholders, y = _depthwise_graph(shape, dtype, ACTIVATIONS["relu6"], stride=2, multiplier=2)
    feeds = _depthwise_feeds(placeholders, shape, dtype, multiplier=2)
    x, w, s, b = (torch.tensor(feeds[p._data]) for p in placeholders)
    want = torch.nn.functional.conv2d(x, w, None, 2, 1, 1, 8) * s.reshape(-1, 1, 1) + b.reshape(-1, 1, 1)
    got = run_optimized(g, values(y), feeds, ["fusion"])[0][0]
    np.testing.assert_allclose(got, want.clamp(0, 6).numpy(), rtol=1e-5, atol=1e-5)


def test_jitted_mobilenet_block_with_joined_layers_equals_eager_as_its_state_changes():
    """An inverted residual (1x1 -> BN -> ReLU6 -> depthwise -> BN -> ReLU6 -> 1x1 -> BN): in eval mode each
    convolution and its batch norm are one node; every convolution's weight and both kinds of batch norm state
    change between calls."""
    import ember as em

    em.manual_seed(0)
    nn = em.nn
    model = nn.Sequential(nn.Conv2d(8, 32, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU6(),
                          nn.Conv2d(32, 32, 3, 2, 1, groups=32, bias=False), nn.BatchNorm2d(32), nn.ReLU6(),
                          nn.Conv2d(32, 8, 1, bias=False), nn.BatchNorm2d(8)).eval()

    def check_events(call, names):  # the depthwise layer and both pointwise ones, each with its batch norm
        assert names.count("conv2d_affine") == (3 if call < 4 else 0), names

    def change_weights():
        for conv in (model[0], model[3], model[6]):
            conv.weight.mul_(-1.5)
        model[1].running_var.mul_(0.5)  # a pointwise layer's batch norm: its statistics and its affine
        model[7].bias.add_(0.25)

    _jitted_eval_equals_eager_as_state_changes(model, em.randn(2, 8, 48, 48), model[4], change_weights, check_events)


def test_a_joined_residual_exports_to_onnx_with_the_same_values():
    """An optimised graph holding channel_affine with a residual and relu maps to Mul, Add, Add and Relu."""
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    from ember.onnx.export import DEFAULT_OPSET, to_onnx
    from ember.onnx.trace import Traced

    shape, dtype = (2, 8, 40, 40), np.float32
    g, placeholders, y = _residual_graph(shape, dtype, ACTIVATIONS["relu"])
    xv, sv, bv = _inputs(shape, dtype)
    feeds = dict(zip((p._data for p in placeholders), (xv, sv, bv, RNG.standard_normal(shape).astype(dtype))))
    opt = optimize(g, values(y), ["fusion"])
    names = ["x", "s", "b", "z"]
    proto = to_onnx(Traced(opt.graph, [opt.map(p._data) for p in placeholders], list(opt.outputs)), names, ["y"], {},
                    DEFAULT_OPSET, do_constant_folding=False)
    assert [n.op_type for n in proto.graph.node].count("Add") == 2
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    got = session.run(None, {name: feeds[p._data] for name, p in zip(names, placeholders)})[0]
    np.testing.assert_allclose(got, run(g, values(y), feeds)[0], rtol=1e-5, atol=1e-5)


def test_the_joined_op_exports_to_onnx_with_the_same_values():
    """An optimised graph holding the jit's conv2d_affine maps to Conv, Mul, Add and Clip (onnxruntime)."""
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    from ember.onnx.export import DEFAULT_OPSET, to_onnx
    from ember.onnx.trace import Traced

    shape, dtype = (2, 8, 40, 40), np.float32
    g, placeholders, y = _depthwise_graph(shape, dtype, ACTIVATIONS["relu6"], stride=2, multiplier=2)
    feeds = _depthwise_feeds(placeholders, shape, dtype, multiplier=2)
    opt = optimize(g, values(y), ["fusion"])
    names = ["x", "w", "s", "b"]
    proto = to_onnx(Traced(opt.graph, [opt.map(p._data) for p in placeholders], list(opt.outputs)), names, ["y"], {},
                    DEFAULT_OPSET, do_constant_folding=False)
    assert [n.op_type for n in proto.graph.node][:1] == ["Conv"] and "Clip" in [n.op_type for n in proto.graph.node]
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    got = session.run(None, {name: feeds[p._data] for name, p in zip(names, placeholders)})[0]
    np.testing.assert_allclose(got, run(g, values(y), feeds)[0], rtol=1e-5, atol=1e-5)
