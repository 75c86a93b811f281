"""Helpers for training: gradient clipping, flattening parameters into one vector, packed sequences (rnn), weight and
spectral normalisation, folding a batch norm into the layer before it."""

from ember.nn.utils import parametrizations, parametrize, rnn, stateless
from ember.nn.utils.clip_grad import clip_grad_norm, clip_grad_norm_, clip_grad_value_, get_total_norm
from ember.nn.utils.convert_parameters import parameters_to_vector, vector_to_parameters
from ember.nn.utils.fusion import fuse_conv_bn_eval, fuse_conv_bn_weights, fuse_linear_bn_eval, fuse_linear_bn_weights
from ember.nn.utils.hooks import RemovableHandle
from ember.nn.utils.spectral_norm import remove_spectral_norm, spectral_norm
from ember.nn.utils.weight_norm import remove_weight_norm, weight_norm

__all__ = ["clip_grad_norm_", "clip_grad_value_", "get_total_norm", "parameters_to_vector",
           "vector_to_parameters", "RemovableHandle", "rnn", "clip_grad_norm", "fuse_conv_bn_eval",
           "fuse_conv_bn_weights", "fuse_linear_bn_eval", "fuse_linear_bn_weights", "remove_spectral_norm",
           "remove_weight_norm", "spectral_norm", "weight_norm", "parametrize", "parametrizations", "stateless"]
