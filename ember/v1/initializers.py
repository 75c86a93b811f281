"""`tf.initializers`: the initializers by their short names, and the variable-initializer operations."""

from ember.v1 import init_ops as _init
from ember.v1 import variables as _variables

constant = _init.Constant
zeros = _init.Zeros
ones = _init.Ones
random_normal = _init.RandomNormal
random_uniform = _init.RandomUniform
truncated_normal = _init.TruncatedNormal
variance_scaling = _init.VarianceScaling
glorot_uniform = _init.GlorotUniform
glorot_normal = _init.GlorotNormal
he_normal = _init.he_normal
he_uniform = _init.he_uniform
lecun_normal = _init.lecun_normal
lecun_uniform = _init.lecun_uniform
global_variables = _variables.global_variables_initializer
local_variables = _variables.local_variables_initializer
variables = _variables.variables_initializer

__all__ = [
    "constant", "global_variables", "glorot_normal", "glorot_uniform", "he_normal", "he_uniform", "lecun_normal",
    "lecun_uniform", "local_variables", "ones", "random_normal", "random_uniform", "truncated_normal",
    "variables", "variance_scaling", "zeros",
]
