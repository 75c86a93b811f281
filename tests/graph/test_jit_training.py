"""A jitted training step equals the eager one over many steps while the user changes what users
change between steps: learning rates (every scheduler), optimizer options, training mode, batch
shapes, parameters written in place, and randomness (dropout). Everything is compared: losses,
parameters, gradients, optimizer state, learning rates and the random generator's state."""

import numpy as np
import pytest

import ember as em
from ember.optim import lr_scheduler as S

F = em.nn.functional
STEPS = 24

OPTIMIZERS = {
    "sgd": lambda ps: em.optim.SGD(ps, lr=0.1),
    "sgd_momentum_dampening_wd": lambda ps: em.optim.SGD(ps, lr=0.1, momentum=0.9, dampening=0.3, weight_decay=1e-2),
    "sgd_nesterov_maximize": lambda ps: em.optim.SGD(ps, lr=0.05, momentum=0.8, nesterov=True, maximize=True),
    "adam": lambda ps: em.optim.Adam(ps, lr=0.01),
    "adam_amsgrad_wd": lambda ps: em.optim.Adam(ps, lr=0.01, betas=(0.8, 0.99), weight_decay=1e-2, amsgrad=True),
    "adamw": lambda ps: em.optim.AdamW(ps, lr=0.01, weight_decay=0.1),
    "rmsprop_centered_momentum": lambda ps: em.optim.RMSprop(ps, lr=0.01, momentum=0.5, centered=True),
    "rmsprop": lambda ps: em.optim.RMSprop(ps, lr=0.01, weight_decay=1e-3),
    "adagrad": lambda ps: em.optim.Adagrad(ps, lr=0.1, lr_decay=0.01, weight_decay=1e-3),
    "adadelta": lambda ps: em.optim.Adadelta(ps, lr=0.5, rho=0.8, weight_decay=1e-3),
    "adamax": lambda ps: em.optim.Adamax(ps, lr=0.01, betas=(0.8, 0.99), weight_decay=1e-3),
    "nadam_decoupled": lambda ps: em.optim.NAdam(ps, lr=0.01, weight_decay=1e-2, decoupled_weight_decay=True),
    "radam": lambda ps: em.optim.RAdam(ps, lr=0.01, betas=(0.8, 0.99)),  # rectified from step 7 on
    "asgd_averaging": lambda ps: em.optim.ASGD(ps, lr=0.05, t0=10, lambd=1e-3),  # the average moves from step 11
}

SCHEDULERS = {
    "none": lambda o: None,
    "step": lambda o: S.StepLR(o, step_size=5, gamma=0.5),
    "multistep": lambda o: S.MultiStepLR(o, milestones=[3, 7, 15], gamma=0.3),
    "exponential": lambda o: S.ExponentialLR(o, gamma=0.9),
    "cosine": lambda o: S.CosineAnnealingLR(o, T_max=10),
    "warm_restarts": lambda o: S.CosineAnnealingWarmRestarts(o, T_0=4, T_mult=2),
    "onecycle": lambda o: S.OneCycleLR(o, max_lr=0.05, total_steps=STEPS,  # momentum/betas cycle too
                                       cycle_momentum="momentum" in o.defaults or "betas" in o.defaults),
    "linear": lambda o: S.LinearLR(o, start_factor=0.1, total_iters=8),
    "lambda": lambda o: S.LambdaLR(o, lambda e: 1.0 / (1 + e)),
    "polynomial": lambda o: S.PolynomialLR(o, total_iters=STEPS, power=2.0),
    "sequential": lambda o: S.SequentialLR(o, [S.ConstantLR(o, factor=0.5, total_iters=3),
                                               S.ExponentialLR(o, gamma=0.8)], milestones=[3]),
    "plateau": lambda o: S.ReduceLROnPlateau(o, patience=1, factor=0.5),
}


def _model(hidden=(16,)):
    em.manual_seed(7)
    widths = (6,) + tuple(hidden)
    layers = []
    for a, b in zip(widths, widths[1:]):
        layers += [em.nn.Linear(a, b), em.nn.Tanh(), em.nn.Dropout(0.2)]
    return em.nn.Sequential(*layers, em.nn.Linear(widths[-1], 3))


def _step_fn(model, opt):
    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return step


class _Run:
    """One training run (jitted or eager) with its own model, optimizer and scheduler."""

    def __init__(self, opt_name, sched_name, jitted, passes=None, hidden=(16,)):
        self.model = _model(hidden)
        self.opt = OPTIMIZERS[opt_name](self.model.parameters())
        self.sched = SCHEDULERS[sched_name](self.opt)
        step = _step_fn(self.model, self.opt)
        self.step = em.jit(step, passes=passes) if jitted else step
        self.lrs = []

    def train(self, batches, rng_seed):
        em.manual_seed(rng_seed)  # both runs draw their dropout masks from the same stream
        losses = []
        for i, (x, y) in enumerate(batches):
            self.model.train(i % 7 != 3)  # a step in eval mode now and then (no dropout)
            if i == 10:
                with em.no_grad():  # the user writes a parameter in place between steps
                    self.model[0].weight.mul_(0.5)
            losses.append(self.step(x, y).item())
            self.lrs.append([g["lr"] for g in self.opt.param_groups])
            if isinstance(self.sched, S.ReduceLROnPlateau):
                self.sched.step(losses[-1])
            elif self.sched is not None:
                self.sched.step()
        return losses, em.get_rng_state()


def _batches():
    em.manual_seed(0)
    sizes = [8] * 12 + [5] + [8] * (STEPS - 13)  # one short batch in the middle: a new shape
    return [(em.randn(n, 6), em.randint(0, 3, (n,))) for n in sizes]


def _state_arrays(opt):
    out = {}
    for k, st in opt.state_dict()["state"].items():
        for name, v in st.items():
            out[(k, name)] = v.numpy() if isinstance(v, em.Tensor) else v
    return out


def _assert_runs_equal(a: _Run, b: _Run, la, lb, rtol, atol):
    check = np.testing.assert_array_equal if rtol == 0 else (
        lambda x, y, **kw: np.testing.assert_allclose(x, y, rtol=rtol, atol=atol, **kw))
    check(la, lb)
    assert a.lrs == b.lrs  # the schedule is the same Python arithmetic in both runs: exactly equal
    for (n, p), q in zip(a.model.named_parameters(), b.model.parameters()):
        check(p.detach().numpy(), q.detach().numpy(), err_msg=n)
        check(p.grad.numpy(), q.grad.numpy(), err_msg=n)
    sa, sb = _state_arrays(a.opt), _state_arrays(b.opt)
    assert sa.keys() == sb.keys()
    for k in sa:
        check(sa[k], sb[k], err_msg=str(k))
    assert a.opt._step_count == b.opt._step_count == STEPS


def _compare(opt_name, sched_name, passes, rtol, atol, hidden=(16,)):
    batches = _batches()
    jit_run = _Run(opt_name, sched_name, True, passes, hidden)
    eager_run = _Run(opt_name, sched_name, False, hidden=hidden)
    lj, rng_j = jit_run.train(batches, 123)
    le, rng_e = eager_run.train(batches, 123)
    _assert_runs_equal(jit_run, eager_run, lj, le, rtol, atol)
    np.testing.assert_array_equal(rng_j.numpy(), rng_e.numpy())  # the compiled program drew its dropout masks as eager did
    # Shapes (8 and 5) x modes (train and eval), plus a first trace made before momentum buffers exist.
    assert jit_run.step.trace_count <= 5


@pytest.mark.parametrize("sched_name", list(SCHEDULERS))
@pytest.mark.parametrize("opt_name", list(OPTIMIZERS))
def test_jitted_training_equals_eager_bit_for_bit_under_every_scheduler(opt_name, sched_name):
    # Without the optimizing passes the graph runs the very kernels eager mode runs, in its order:
    # every number must be identical, whatever the schedule changed between steps.
    _compare(opt_name, sched_name, passes=False, rtol=0, atol=0)


@pytest.mark.parametrize("sched_name", ["onecycle", "cosine", "plateau"])
@pytest.mark.parametrize("opt_name", list(OPTIMIZERS))
def test_jitted_training_with_fused_kernels_stays_close_to_eager(opt_name, sched_name):
    # Fused kernels evaluate tanh/exp with their own math library: the last bits differ and drift a
    # little over 24 steps (most in RMSprop, whose sqrt(v) + eps amplifies them).
    _compare(opt_name, sched_name, passes=None, rtol=2e-2, atol=2e-4)


@pytest.mark.parametrize("opt_name", ["sgd_momentum_dampening_wd", "adam_amsgrad_wd"])
@pytest.mark.parametrize("threads", [1, 2])
def test_jitted_training_with_split_fused_loops_stays_close_to_eager(set_threads, threads, opt_name):
    """A weight of 300 x 256 values: past fused_elementwise's split_min, so the plan's fused updates and the eager
    optimizer's one-pass updates run in chunks over the threads, while the schedule, modes, shapes and the
    parameters in place change between steps."""
    from ember.kernels.elementwise import FUSED

    assert 300 * 256 >= FUSED["split_min"]
    set_threads(threads)
    _compare(opt_name, "onecycle", passes=None, rtol=2e-2, atol=2e-4, hidden=(16, 300, 256))


def test_batch_norm_cumulative_average_under_jit_equals_eager():
    # momentum=None divides by num_batches_tracked, a buffer updated inside the step
    def run(jit):
        em.manual_seed(0)
        bn = em.nn.BatchNorm1d(3, momentum=None)
        f = em.jit(lambda x: bn(x)) if jit else (lambda x: bn(x))
        rng = np.random.default_rng(0)
        for _ in range(5):
            f(em.tensor(rng.standard_normal((4, 3)).astype("float32")))
        return bn.running_mean.numpy(), bn.running_var.numpy(), int(bn.num_batches_tracked)

    (mean, var, n), (jmean, jvar, jn) = run(False), run(True)
    assert n == jn == 5
    np.testing.assert_allclose(jmean, mean, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(jvar, var, rtol=1e-6, atol=1e-7)


def test_in_place_writes_to_tensor_arguments_reach_the_caller():
    """f(p, g) that updates p in place leaves p updated after a jitted call too (as eagerly and under
    torch.compile), call after call, the data changed in between; the returned value is the new one."""

    def step(p, g, lr):
        p.sub_(g * lr)
        p.clamp_(-1.0, 1.0)
        return p * 2

    rng = np.random.default_rng(0)
    eager_p, jit_p = em.zeros(5), em.zeros(5)
    jitted = em.jit(step)
    for i in range(4):
        g = em.tensor(rng.standard_normal(5).astype(np.float32))
        want = step(eager_p, g, 0.3 + i)
        got = jitted(jit_p, g, 0.3 + i)
        np.testing.assert_array_equal(jit_p.numpy(), eager_p.numpy())
        np.testing.assert_array_equal(got.numpy(), want.numpy())

    def reset(a, b):  # writes that take no computed value: a fill, and a copy of another argument
        a.fill_(2.0)
        b.copy_(a)

    a, b = em.ones(3), em.zeros(3)
    em.jit(reset)(a, b)
    np.testing.assert_array_equal(a.numpy(), [2, 2, 2])
    np.testing.assert_array_equal(b.numpy(), [2, 2, 2])
