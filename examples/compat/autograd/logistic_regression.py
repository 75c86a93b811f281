"""HIPS autograd's logistic-regression tutorial: a loss written in NumPy, its gradient by `grad`,
gradient descent, and a check of the gradient by finite differences.

It runs unchanged on Ember; for HIPS autograd only the import lines marked below differ
(tests/test_compat_corpus.py runs it both ways and compares the numbers). The last line printed is
a JSON summary.
"""

import json

import numpy as onp

import ember.numpy as np  # autograd: import autograd.numpy as np
from ember import grad  # autograd: from autograd import grad


def sigmoid(x):
    return 0.5 * (np.tanh(x / 2.0) + 1)


def logistic_predictions(weights, inputs):
    return sigmoid(np.dot(inputs, weights))


def training_loss(weights):
    preds = logistic_predictions(weights, inputs)
    label_probabilities = preds * targets + (1 - preds) * (1 - targets)
    return -np.sum(np.log(label_probabilities))


inputs = onp.array([[0.52, 1.12, 0.77], [0.88, -1.08, 0.15], [0.52, 0.06, -1.30], [0.74, -2.49, 1.39]])
targets = onp.array([True, True, False, True])

training_gradient_fun = grad(training_loss)
weights = onp.array([0.0, 0.0, 0.0])
initial = float(training_loss(weights))
for _ in range(100):
    weights = weights - training_gradient_fun(weights) * 0.01

eps = 1e-6
numeric = [float((training_loss(weights + eps * e) - training_loss(weights - eps * e)) / (2 * eps)) for e in onp.eye(3)]
print(f"trained loss: {float(training_loss(weights)):.4f}")
print(json.dumps({"initial_loss": initial, "trained_loss": float(training_loss(weights)),
                  "weights": [float(w) for w in weights], "gradient": [float(g) for g in training_gradient_fun(weights)],
                  "numeric_gradient": numeric}))
