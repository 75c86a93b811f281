"""What ember.jit keys its compiled programs on, and what it reads afresh at every call.

Every Python value a traced function reads from mutable state must be either a graph input read at
each call or part of the cache key; these tests change each kind between calls.
"""

import gc
import warnings

import numpy as np
import pytest

import ember as em


def test_numpy_array_arguments_are_inputs_not_identities():
    f = em.jit(lambda x, s: x * em.tensor(s))
    wrong = 0
    for i in range(300):  # freed arrays' ids are reused: a cache keyed by id() returns stale results
        wrong += f(em.ones(3), np.full(3, float(i)))[0].item() != i
    assert wrong == 0
    assert f.trace_count == 1


def test_an_array_mutated_in_place_between_calls_is_read_again():
    f = em.jit(lambda x, s: x + em.as_tensor(s))
    s = np.zeros(2)
    assert f(em.ones(2, dtype=em.float64), s).tolist() == [1, 1]
    s += 5
    assert f(em.ones(2, dtype=em.float64), s).tolist() == [6, 6]
    assert f(em.ones(3, dtype=em.float64), np.zeros(3)).shape == (3,)  # another shape: another program


def test_numpy_operations_on_an_array_argument_say_it_is_symbolic():
    f = em.jit(lambda x, s: x * float(np.asarray(s).sum()))
    with pytest.raises(em.ConcretizationError, match="symbolic"):
        f(em.ones(2), np.ones(2))


def test_unhashable_arguments_get_a_clear_error():
    class Box:
        __hash__ = None

    f = em.jit(lambda x, b: x)
    with pytest.raises(TypeError, match=r"jit: .*Box.*neither a tensor, a NumPy array nor hashable"):
        f(em.ones(2), Box())


def test_python_scalars_and_lists_are_keyed_by_value():
    f = em.jit(lambda x, k, ks: x * k + sum(ks))
    assert f(em.ones(1), 2.0, [1, 2]).item() == 5
    assert f(em.ones(1), 3.0, [1, 2]).item() == 6
    assert f(em.ones(1), 3.0, [1, 5]).item() == 9
    assert f.trace_count == 3


def test_learning_rate_changed_by_hand_takes_effect_without_retracing():
    w = em.ones(2, requires_grad=True)
    opt = em.optim.SGD([w], lr=0.5)

    @em.jit
    def step(x):
        opt.zero_grad()
        (w * x).sum().backward()
        opt.step()

    for lr in (0.5, 0.25, 0.0, 1.0):
        before = w.detach().clone()
        opt.param_groups[0]["lr"] = lr
        step(em.ones(2))
        assert (before - w.detach()).tolist() == [lr, lr]
    assert step.trace_count == 1


def test_structural_options_retrace_and_numbers_do_not():
    w = em.ones(2, requires_grad=True)
    opt = em.optim.SGD([w], lr=0.1)
    eager_w = em.ones(2, requires_grad=True)
    eager = em.optim.SGD([eager_w], lr=0.1)

    def make(w, opt):
        def step(x):
            opt.zero_grad()
            (w * x).pow(2).sum().backward()
            opt.step()
        return step

    jitted, plain = em.jit(make(w, opt)), make(eager_w, eager)
    for i in range(8):
        for o in (opt, eager):
            g = o.param_groups[0]
            g["momentum"] = 0.9 if i >= 3 else 0.0  # turns momentum on: a different program
            g["nesterov"] = i >= 5
            g["weight_decay"] = 0.01 * i  # zero at first, then a number that changes every step
        jitted(em.full((2,), 0.5))
        plain(em.full((2,), 0.5))
        assert w.tolist() == eager_w.tolist()
    assert jitted.trace_count <= 6


def test_module_attributes_and_modes_are_part_of_the_key():
    drop = em.nn.Dropout(0.0)
    f = em.jit(lambda x: drop(x))
    x = em.ones(1000)
    assert (f(x) == 1).all().item()
    drop.p = 1.0  # a Python attribute changed between calls: the program is rebuilt
    assert (f(x) == 0).all().item()
    drop.eval()
    assert (f(x) == 1).all().item()


def test_replacing_a_parameter_or_submodule_is_seen():
    model = em.nn.Sequential(em.nn.Linear(2, 2, bias=False))
    with em.no_grad():
        model[0].weight.fill_(1.0)
    f = em.jit(lambda x: model(x))
    x = em.ones(1, 2)
    assert f(x).tolist() == [[2, 2]]
    model[0].weight = em.nn.Parameter(em.full((2, 2), 3.0))
    assert f(x).tolist() == [[6, 6]]
    model[0] = em.nn.Linear(2, 2, bias=False)
    with em.no_grad():
        model[0].weight.fill_(-1.0)
    assert f(x).tolist() == [[-2, -2]]


def test_adding_or_removing_a_hook_after_tracing_is_seen():
    """The trace ran the hooks there were: a hook added or removed later must rebuild the program."""
    model = em.nn.Sequential(em.nn.Linear(3, 3), em.nn.ReLU())
    f = em.jit(lambda x: model(x))
    x = em.randn(2, 3)
    with em.no_grad():
        _check_hooks(f, model, x)


def _check_hooks(f, model, x):
    for _ in range(2):
        np.testing.assert_array_equal(f(x).numpy(), model(x).numpy())
    handles = [model[0].register_forward_hook(lambda m, inp, out: out * 0 - 1),
               model.register_forward_pre_hook(lambda m, inp: (inp[0] * 3,)),
               model[1].register_forward_hook(lambda m, inp, out: out + 5, prepend=True)]
    for h in handles + [None]:
        for _ in range(2):
            np.testing.assert_array_equal(f(x).numpy(), model(x).numpy())
        if h is not None:
            h.remove()
    assert f(x).tolist() == model(x).tolist()


def test_replacing_a_plain_tensor_or_function_attribute_rebuilds_the_program():
    """A tensor the trace captured, or a function it inlined, held as a plain module attribute (not a parameter
    or buffer): assigning another one must not leave the old one in the program."""
    F = em.nn.functional

    class Gate(em.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = em.nn.Linear(3, 3)
            self.mask = em.ones(3)
            self.act = F.relu

        def forward(self, x):
            return self.act(self.lin(x)) * self.mask

    m = Gate()
    f = em.jit(lambda x: m(x))
    x = em.randn(4, 3)
    with em.no_grad():
        for change in (lambda: None, lambda: setattr(m, "mask", em.full((3,), -2.0)),
                       lambda: setattr(m, "act", F.gelu), lambda: setattr(m, "act", lambda t: t * 3.0),
                       lambda: setattr(m, "act", lambda t: t * -1.0)):
            change()
            np.testing.assert_array_equal(f(x).numpy(), m(x).numpy())
    assert f.trace_count == 5


def _changes():
    """Structural changes a user makes between calls, each through another path into a module."""
    def set_p(m):
        m[1].p = 1.0

    def sequential_append(m):
        m.append(em.nn.Tanh())

    def sequential_del(m):
        del m[-1]

    def sequential_insert(m):
        m.insert(0, em.nn.Identity())

    def parameters_dict(m):
        m[0]._parameters["bias"] = em.nn.Parameter(em.full((3,), 7.0))

    def buffers(m):
        m[0].register_buffer("scale", em.ones(1))

    def module_list(m):
        m[0].extra = em.nn.ModuleList([em.nn.Linear(3, 3)])
        m[0].extra.append(em.nn.Linear(3, 3))

    def delete_attribute(m):
        del m[0].weight
        m[0].weight = em.nn.Parameter(em.full((3, 3), 0.5))

    def train_mode(m):
        m.train()

    return [set_p, sequential_append, sequential_del, sequential_insert, parameters_dict, buffers, module_list,
            delete_attribute, train_mode]


@pytest.mark.parametrize("change", _changes(), ids=lambda c: c.__name__)
def test_every_path_that_changes_a_module_rebuilds_the_program(change):
    """Module keys are read again only after some module changed (graph/module_structure.py): every way a user
    changes one must count as a change, or the stale program would run."""
    em.manual_seed(0)
    model = em.nn.Sequential(em.nn.Linear(3, 3), em.nn.Dropout(0.0), em.nn.ReLU()).eval()
    f = em.jit(lambda x: model(x))
    x = em.randn(4, 3)
    np.testing.assert_array_equal(f(x).detach().numpy(), model(x).detach().numpy())
    traced = f.trace_count
    change(model)
    em.manual_seed(1)
    want = model(x).detach().numpy()
    em.manual_seed(1)
    np.testing.assert_array_equal(f(x).detach().numpy(), want)
    assert f.trace_count == traced + 1
    np.testing.assert_array_equal(f(x).detach().numpy(), want)  # and then the keys are read from the cache again
    assert f.trace_count == traced + 1


def test_copied_and_unpickled_models_are_tracked_like_new_ones():
    import copy
    import pickle

    from ember.graph import module_structure as structure

    model = em.nn.Sequential(em.nn.Linear(2, 2), em.nn.ReLU())
    for twin in (copy.deepcopy(model), pickle.loads(pickle.dumps(model))):
        for m in twin.modules():
            for store in ("_parameters", "_buffers", "_modules", "_forward_hooks", "_forward_pre_hooks"):
                assert type(getattr(m, store)) in (structure.TrackedDict, structure.TrackedOrderedDict), store
        before = structure.version()
        twin[1].register_forward_hook(lambda m, inp, out: out)
        assert structure.version() > before
    old = em.nn.ReLU()  # a module pickled before the stores were tracked: plain dicts
    state = {k: (dict(v) if isinstance(v, dict) else v) for k, v in vars(old).items()}
    revived = em.nn.ReLU.__new__(em.nn.ReLU)
    revived.__setstate__(state)
    assert type(revived._forward_hooks) is structure.TrackedOrderedDict
    assert type(revived._modules) is structure.TrackedDict


def test_every_change_to_a_tracked_store_counts():
    from ember.graph import module_structure as structure

    for store in (structure.TrackedDict(a=1), structure.TrackedOrderedDict(a=1)):
        ops = [lambda d: d.__setitem__("b", 2), lambda d: d.__delitem__("b"), lambda d: d.update(c=3),
               lambda d: d.setdefault("e", 5), lambda d: d.pop("e"), lambda d: d.__ior__({"f": 6}),
               lambda d: d.popitem(), lambda d: d.clear()]
        if isinstance(store, structure.TrackedOrderedDict):
            ops.insert(3, lambda d: d.move_to_end("a"))
        for op in ops:
            before = structure.version()
            op(store)
            assert structure.version() > before


SCALE = 2.0


def _scaled(x):
    return x * SCALE


def test_globals_and_closure_numbers_the_function_reads_are_part_of_the_key():
    global SCALE
    f = em.jit(_scaled)
    assert f(em.ones(1)).item() == 2
    SCALE = 5.0
    try:
        assert f(em.ones(1)).item() == 5
    finally:
        SCALE = 2.0
    k = 3

    def g(x):
        return x + k

    jg = em.jit(g)
    assert jg(em.zeros(1)).item() == 3
    k = 4
    assert jg(em.zeros(1)).item() == 4


def test_freezing_and_unfreezing_a_layer_between_steps_matches_eager():
    """Fine-tuning: requires_grad_(False) on a layer's parameters between jitted steps must stop their updates
    (the program differentiated them), and requires_grad_(True) must resume them, as in eager."""
    def run(jitted):
        em.manual_seed(0)
        model = em.nn.Sequential(em.nn.Linear(4, 8), em.nn.Tanh(), em.nn.Linear(8, 2))
        opt = em.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

        def step(x, y):
            opt.zero_grad()
            loss = em.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss

        f = em.jit(step) if jitted else step
        x, y = em.randn(6, 4), em.tensor([0, 1, 1, 0, 1, 0])
        history = []
        for i in range(8):
            if i in (3, 6):
                for p in model[0].parameters():
                    p.requires_grad_(i == 6)
            loss = f(x, y).item()
            history.append((loss, [(p.detach().numpy().copy(), None if p.grad is None else p.grad.numpy().copy())
                                   for p in model.parameters()]))
        return history

    for (loss_e, params_e), (loss_j, params_j) in zip(run(False), run(True)):
        assert loss_e == loss_j
        for (pe, ge), (pj, gj) in zip(params_e, params_j):
            np.testing.assert_array_equal(pj, pe)
            assert (ge is None) == (gj is None)
            if ge is not None:
                np.testing.assert_array_equal(gj, ge)


def test_a_parameter_given_new_data_of_another_shape_retraces():
    m = em.nn.Linear(3, 2)
    f = em.jit(lambda x: m(x))
    x = em.ones(1, 3)
    with em.no_grad():
        assert f(x).shape == (1, 2)
        m.weight.data = em.ones(4, 3)
        m.bias.data = em.zeros(4)
        np.testing.assert_array_equal(f(x).numpy(), m(x).numpy())
        assert f(x).tolist() == [[3, 3, 3, 3]]


WEIGHT = em.ones(3)


def _weighted(x):
    return x * WEIGHT


def test_a_global_or_closure_variable_rebound_to_another_tensor_or_function_is_seen():
    """The trace captured the tensor (or inlined the function) the name held: rebinding the name must rebuild the
    program, not leave the old value in it; writing into the same tensor in place is read at the next call."""
    global WEIGHT
    f = em.jit(_weighted)
    x = em.ones(3)
    assert f(x).tolist() == [1, 1, 1]
    saved = WEIGHT
    try:
        WEIGHT = em.full((3,), 5.0)
        assert f(x).tolist() == [5, 5, 5]
        WEIGHT.add_(1.0)
        assert f(x).tolist() == [6, 6, 6]
    finally:
        WEIGHT = saved
    v, act = em.ones(3), em.nn.functional.relu

    def g(t):
        return act(t * v)

    jg = em.jit(g)
    assert jg(-x).tolist() == [0, 0, 0]
    v = em.full((3,), 7.0)
    assert jg(x).tolist() == [7, 7, 7]
    act = em.neg
    assert jg(x).tolist() == [-7, -7, -7]
    assert jg.trace_count == 3


def test_optimizer_load_state_dict_is_seen_by_a_compiled_step():
    em.manual_seed(0)
    w = em.randn(3, requires_grad=True)
    opt = em.optim.Adam([w], lr=0.1)

    @em.jit
    def step():
        opt.zero_grad()
        (w * w).sum().backward()
        opt.step()

    for _ in range(3):
        step()
    saved = {k: v for k, v in opt.state_dict().items()}
    saved = {"state": {i: {n: t.clone() for n, t in s.items()} for i, s in saved["state"].items()},
             "param_groups": saved["param_groups"]}
    for _ in range(3):
        step()
    opt.load_state_dict(saved)  # new state tensors: the compiled step must update those
    step()
    assert opt.state[w]["step"].item() == 4
    assert step.trace_count == 2


def test_the_cache_is_bounded_and_warns_once_when_it_keeps_retracing():
    f = em.jit(lambda x: x * 2, cache_size=3, dynamic=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in range(1, 9):
            f(em.ones(n))
    assert len(f.entries()) == 3
    msgs = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(msgs) == 1
    assert "traced 4 times" in msgs[0] and "shape (3,) float32 -> shape (4,) float32" in msgs[0]
    gc.collect()


def test_bad_cache_size_is_refused():
    with pytest.raises(ValueError, match="cache_size must be a positive int"):
        em.jit(lambda x: x, cache_size=0)


def test_step_count_advances_under_jit():
    w = em.ones(1, requires_grad=True)
    opt = em.optim.SGD([w], lr=0.1)

    @em.jit
    def step():
        opt.zero_grad()
        w.sum().backward()
        opt.step()

    for _ in range(5):
        step()
    assert opt._step_count == 5


OFFSET = 1.0


def _in_listcomp(x):
    return [x * OFFSET for _ in range(1)][0]


def _in_genexpr(x):
    return sum(x * OFFSET for _ in range(1))


def _in_lambda(x):
    return (lambda t: t * OFFSET)(x)


def _in_inner_function_comprehension(x):
    def inner(t):
        return {k: t * OFFSET for k in range(1)}[0]  # two levels down

    return inner(x)


@pytest.mark.parametrize("fn", [_in_listcomp, _in_genexpr, _in_lambda, _in_inner_function_comprehension])
def test_globals_read_in_comprehensions_lambdas_and_inner_functions_are_part_of_the_key(fn):
    """Nested code (a comprehension, a generator expression, a lambda, a comprehension in an inner function)
    reads globals too: rebinding one must rebuild the program, as for a global the function reads itself."""
    global OFFSET
    f = em.jit(fn)
    x = em.ones(1)
    assert f(x).item() == 1
    try:
        OFFSET = 3.0
        assert f(x).item() == 3
    finally:
        OFFSET = 1.0
    assert f(x).item() == 1
    assert f.trace_count == 2  # the program for OFFSET = 1 was kept


step = 0  # a module-level loop counter that shares its name with the optimizer's method


def test_an_attribute_named_like_a_changing_global_is_not_keyed():
    """`opt.step()` names the attribute `step`, not the global `step`: a training loop counting in a global `step`
    must not rebuild the program at every call (co_names lists both; only LOAD_GLOBAL reads a global)."""
    global step
    model = em.nn.Linear(3, 2)
    opt = em.optim.SGD(model.parameters(), lr=0.1)

    @em.jit
    def train_step(x):
        opt.zero_grad()
        loss = model(x).sum()
        loss.backward()
        opt.step()
        return loss

    x = em.ones(4, 3)
    try:
        for step in range(200):  # noqa: B007 - the global is the point
            train_step(x)
    finally:
        step = 0
    assert train_step.trace_count == 1
