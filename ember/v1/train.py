"""`tf.train`: gradient descent, momentum and Adam optimizers with TF1's update formulas, built as graph ops;
and the distributed pieces (ClusterSpec, Server, replica_device_setter, MonitoredTrainingSession).

Each update is an assign op on the variable (and on slot variables such as momentum
accumulators), so running the returned operation performs one training step.
"""

from __future__ import annotations

import numpy as np

from ember import dtypes as dt
from ember.tensor import Tensor
from ember.v1.constant_ops import fill
from ember.v1.convert import convert_to_tensor, is_symbolic
from ember.v1.gradients_impl import gradients
from ember.v1.graph_api import TRAINABLE_VARIABLES, Operation, control_dependencies, device, get_default_graph
from ember.v1.learning_rate_decay import (  # tf.train's schedules
    exponential_decay,
    inverse_time_decay,
    piecewise_constant,
    polynomial_decay,
)
from ember.v1.math_ops import sqrt
from ember.v1.saver import (  # tf.train's checkpoints
    CheckpointState,
    Saver,
    checkpoint_exists,
    get_checkpoint_state,
    latest_checkpoint,
    list_variables,
    load_variable,
    update_checkpoint_state,
)
from ember.v1.state_ops import assign, assign_add, assign_sub, group
from ember.v1.summary import summary_iterator
from ember.v1.variables import Variable

__all__ = [
    "AdagradOptimizer", "AdamOptimizer", "CheckpointState", "ClusterSpec", "GradientDescentOptimizer",
    "MomentumOptimizer", "MonitoredTrainingSession", "Optimizer", "RMSPropOptimizer", "Saver", "Server",
    "StopAtStepHook", "checkpoint_exists", "exponential_decay", "get_checkpoint_state", "get_global_step",
    "get_or_create_global_step", "inverse_time_decay", "latest_checkpoint", "list_variables", "load_variable",
    "piecewise_constant", "polynomial_decay", "replica_device_setter", "summary_iterator", "update_checkpoint_state",
]


class Optimizer:
    """The TF1 optimizer interface: compute_gradients, apply_gradients, minimize, slots."""

    GATE_NONE, GATE_OP, GATE_GRAPH = 0, 1, 2

    def __init__(self, use_locking: bool, name: str) -> None:
        self._name = name
        self._slots: dict = {}  # slot name -> {variable: slot variable}

    def get_name(self) -> str:
        """The name slot variables are made with."""
        return self._name

    # --- the public steps ------------------------------------------------------------------------
    def compute_gradients(self, loss, var_list=None, gate_gradients: int = 1, aggregation_method=None,
                          colocate_gradients_with_ops: bool = False, grad_loss=None) -> list:
        """[(gradient, variable)] for the trainable variables (or var_list); None where loss ignores one."""
        loss = convert_to_tensor(loss)
        graph = loss._data.graph
        if var_list is None:
            var_list = graph.get_collection(TRAINABLE_VARIABLES) if hasattr(graph, "get_collection") else []
        var_list = list(var_list)
        if not var_list:
            raise ValueError("No variables to optimize.")
        grads = gradients(loss, var_list, grad_ys=None if grad_loss is None else [grad_loss])
        return list(zip(grads, var_list))

    def apply_gradients(self, grads_and_vars, global_step: Variable | None = None, name: str | None = None) -> Operation:
        """One operation applying the gradients (and incrementing global_step after them)."""
        pairs = [(g, v) for g, v in grads_and_vars]
        live = [(g, v) for g, v in pairs if g is not None]
        if not live:
            raise ValueError(f"No gradients provided for any variable: {[v.name for _, v in pairs]}")
        graph = live[0][1].graph
        with graph.as_default():
            self._create_slots([v for _, v in live])
            self._prepare()
            updates = []
            for g, v in live:
                with device(v.device):  # each update runs with its variable (its slots live there too)
                    updates.append(self._apply_dense(convert_to_tensor(g, dtype_hint=v.dtype), v))
            if global_step is None:
                return self._finish(updates, name or self._name)
            with control_dependencies([self._finish(updates, "update")]):
                return _as_op(assign_add(global_step, 1, name=name or self._name))

    def minimize(self, loss, global_step: Variable | None = None, var_list=None, gate_gradients: int = 1,
                 aggregation_method=None, colocate_gradients_with_ops: bool = False, name: str | None = None,
                 grad_loss=None) -> Operation:
        """compute_gradients then apply_gradients: one operation doing a training step."""
        pairs = self.compute_gradients(loss, var_list=var_list, grad_loss=grad_loss)
        if all(g is None for g, _ in pairs):
            raise ValueError(
                f"No gradients provided for any variable, check your graph for ops that do not support gradients, "
                f"between variables {[v.name for _, v in pairs]} and loss {loss!r}."
            )
        return self.apply_gradients(pairs, global_step=global_step, name=name)

    # --- slots ---------------------------------------------------------------------------------------
    def get_slot(self, var: Variable, name: str) -> Variable | None:
        """The slot variable `name` of `var` (None if there is none)."""
        return self._slots.get(name, {}).get(var)

    def get_slot_names(self) -> list:
        """Names of the slots this optimizer keeps per variable."""
        return sorted(self._slots)

    def _zeros_slot(self, var: Variable, slot: str, op_name: str) -> Variable:
        return self._filled_slot(var, slot, op_name, 0.0)

    def _filled_slot(self, var: Variable, slot: str, op_name: str, value: float) -> Variable:
        """The slot variable `slot` of `var` ("<var>/<op_name>"), made on first use filled with `value`."""
        slots = self._slots.setdefault(slot, {})
        if var not in slots:
            graph = var.graph
            with graph.as_default(), graph.name_scope(None), device(var.device):
                slots[var] = Variable(fill(var.spec_shape, np.asarray(value, dtype=var.spec_dtype)), trainable=False,
                                      name=f"{var.op_name}/{op_name}")
        return slots[var]

    def _hyper(self, value, var: Variable) -> Tensor:
        """A hyperparameter (number or tensor) as a tensor of var's dtype."""
        t = convert_to_tensor(value() if callable(value) else value, dtype_hint=var.dtype)
        return t if t.dtype is var.dtype else t.to(var.dtype)

    # --- what subclasses define --------------------------------------------------------------------
    def _create_slots(self, var_list: list) -> None:
        pass

    def _prepare(self) -> None:
        pass

    def _apply_dense(self, grad: Tensor, var: Variable):
        raise NotImplementedError

    def _finish(self, update_ops: list, name: str) -> Operation:
        return group(*update_ops, name=name)


def _as_op(t: Tensor) -> Operation:
    return Operation(t._data.node)


class GradientDescentOptimizer(Optimizer):
    """var -= learning_rate * grad."""

    def __init__(self, learning_rate, use_locking: bool = False, name: str = "GradientDescent") -> None:
        super().__init__(use_locking, name)
        self._lr = learning_rate

    def _apply_dense(self, grad, var):
        return assign_sub(var, self._hyper(self._lr, var) * grad)


class MomentumOptimizer(Optimizer):
    """accum = momentum * accum + grad; var -= lr * accum (Nesterov: var -= lr * (grad + momentum * accum))."""

    def __init__(self, learning_rate, momentum, use_locking: bool = False, name: str = "Momentum",
                 use_nesterov: bool = False) -> None:
        super().__init__(use_locking, name)
        self._lr = learning_rate
        self._momentum = momentum
        self._nesterov = bool(use_nesterov)

    def _create_slots(self, var_list):
        for v in var_list:
            self._zeros_slot(v, "momentum", self._name)

    def _apply_dense(self, grad, var):
        lr, mu = self._hyper(self._lr, var), self._hyper(self._momentum, var)
        accum = self.get_slot(var, "momentum")
        accum_t = assign(accum, accum * mu + grad)
        if self._nesterov:
            return assign_sub(var, grad * lr + accum_t * mu * lr)
        return assign_sub(var, accum_t * lr)


class AdamOptimizer(Optimizer):
    """Adam as TF1 computes it: lr_t = lr * sqrt(1 - beta2^t) / (1 - beta1^t); var -= lr_t * m / (sqrt(v) + eps)."""

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8, use_locking: bool = False,
                 name: str = "Adam") -> None:
        super().__init__(use_locking, name)
        self._lr, self._beta1, self._beta2, self._epsilon = learning_rate, beta1, beta2, epsilon
        self._powers: dict = {}  # graph -> (beta1_power, beta2_power)

    def _get_beta_accumulators(self) -> tuple:
        return self._powers[get_default_graph()]

    def _create_slots(self, var_list):
        graph = get_default_graph()
        if graph not in self._powers:
            first = var_list[0]
            b1 = self._beta1 if is_symbolic(self._beta1) else float(self._beta1)
            b2 = self._beta2 if is_symbolic(self._beta2) else float(self._beta2)
            self._powers[graph] = (
                Variable(convert_to_tensor(b1, dtype=first.dtype), trainable=False, name="beta1_power"),
                Variable(convert_to_tensor(b2, dtype=first.dtype), trainable=False, name="beta2_power"),
            )
        for v in var_list:
            self._zeros_slot(v, "m", self._name)
            self._zeros_slot(v, "v", self._name)

    def _apply_dense(self, grad, var):
        b1p, b2p = self._get_beta_accumulators()
        lr, eps = self._hyper(self._lr, var), self._hyper(self._epsilon, var)
        b1, b2 = self._hyper(self._beta1, var), self._hyper(self._beta2, var)
        one = 1.0
        lr_t = lr * sqrt(one - _cast(b2p, var)) / (one - _cast(b1p, var))
        m, v = self.get_slot(var, "m"), self.get_slot(var, "v")
        m_t = assign(m, m * b1 + grad * (one - b1))
        v_t = assign(v, v * b2 + (grad * grad) * (one - b2))
        var_t = assign_sub(var, lr_t * m_t / (sqrt(v_t) + eps))
        return group(var_t, m_t, v_t)

    def _finish(self, update_ops, name):
        b1p, b2p = self._get_beta_accumulators()
        with control_dependencies(update_ops), device(b1p.device):
            up1 = assign(b1p, b1p * self._hyper(self._beta1, b1p))
            up2 = assign(b2p, b2p * self._hyper(self._beta2, b2p))
        return group(*update_ops, up1, up2, name=name)


class RMSPropOptimizer(Optimizer):
    """TF1's RMSProp: ms = decay * ms + (1 - decay) * g^2 (ms starts at ones); mom = momentum * mom +
    lr * g / sqrt(ms + epsilon); var -= mom. Centered: the mean gradient mg is tracked and ms - mg^2 used."""

    def __init__(self, learning_rate, decay=0.9, momentum=0.0, epsilon=1e-10, use_locking: bool = False,
                 centered: bool = False, name: str = "RMSProp") -> None:
        super().__init__(use_locking, name)
        self._lr, self._decay, self._momentum, self._epsilon = learning_rate, decay, momentum, epsilon
        self._centered = bool(centered)

    def _create_slots(self, var_list):
        for v in var_list:
            self._filled_slot(v, "rms", self._name, 1.0)
            if self._centered:
                self._zeros_slot(v, "mg", self._name)
            self._zeros_slot(v, "momentum", self._name)

    def _apply_dense(self, grad, var):
        lr, rho = self._hyper(self._lr, var), self._hyper(self._decay, var)
        mu, eps = self._hyper(self._momentum, var), self._hyper(self._epsilon, var)
        ms, mom = self.get_slot(var, "rms"), self.get_slot(var, "momentum")
        ms_t = assign(ms, ms * rho + grad * grad * (1.0 - rho))
        denom = ms_t
        updates = [ms_t]
        if self._centered:
            mg = self.get_slot(var, "mg")
            mg_t = assign(mg, mg * rho + grad * (1.0 - rho))
            denom = ms_t - mg_t * mg_t
            updates.append(mg_t)
        mom_t = assign(mom, mom * mu + lr * grad / sqrt(denom + eps))
        return group(assign_sub(var, mom_t), mom_t, *updates)


class AdagradOptimizer(Optimizer):
    """TF1's Adagrad: accum += g^2 (accum starts at initial_accumulator_value); var -= lr * g / sqrt(accum)."""

    def __init__(self, learning_rate, initial_accumulator_value=0.1, use_locking: bool = False,
                 name: str = "Adagrad") -> None:
        if initial_accumulator_value <= 0.0:
            raise ValueError(f"initial_accumulator_value must be positive: {initial_accumulator_value}")
        super().__init__(use_locking, name)
        self._lr = learning_rate
        self._initial = float(initial_accumulator_value)

    def _create_slots(self, var_list):
        for v in var_list:
            self._filled_slot(v, "accumulator", self._name, self._initial)

    def _apply_dense(self, grad, var):
        acc = self.get_slot(var, "accumulator")
        acc_t = assign_add(acc, grad * grad)
        return group(assign_sub(var, self._hyper(self._lr, var) * grad / sqrt(acc_t)), acc_t)


def _cast(t: Tensor, like: Tensor) -> Tensor:
    return t if t.dtype is like.dtype else t.to(like.dtype)


# --- global step ---------------------------------------------------------------------------------------
def get_global_step(graph=None) -> Variable | None:
    """The graph's global step variable, if one was made."""
    graph = graph or get_default_graph()
    steps = graph.get_collection("global_step")
    return steps[0] if steps else None


def get_or_create_global_step(graph=None) -> Variable:
    """The graph's int64 global step variable (created, starting at 0, on first use)."""
    graph = graph or get_default_graph()
    step = get_global_step(graph)
    if step is None:
        with graph.as_default():
            step = Variable(convert_to_tensor(0, dtype=dt.int64), trainable=False, name="global_step")
        graph.add_to_collection("global_step", step)
    return step


create_global_step = get_or_create_global_step


# Distributed programs (between-graph replication on MPI ranks): see cluster.py and monitored_session.py.
from ember.v1.cluster import ClusterSpec, Server, replica_device_setter  # noqa: E402
from ember.v1.monitored_session import MonitoredTrainingSession, StopAtStepHook  # noqa: E402
