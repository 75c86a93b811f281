"""The model zoo: torchvision-compatible ImageNet networks, small models for CPUs, and em.summary.

Build by function (`ember.models.resnet18(num_classes=10)`) or by name (`get_model("resnet18")`).
The ImageNet models have torchvision's structure, parameter names and initialisation, so torchvision
state dicts saved as safetensors load into them unchanged.
"""

from ember.models.alexnet import AlexNet, alexnet
from ember.models.cifar_resnet import CifarResNet, resnet18_cifar, resnet20
from ember.models.lstm_classifier import LSTMClassifier, lstm_classifier
from ember.models.mobilenet import MobileNetV2, mobilenet_v2
from ember.models.ncf import NCF, ncf
from ember.models.registry import default_input_size, get_model, list_models
from ember.models.resnet import BasicBlock, Bottleneck, ResNet, resnet18, resnet34, resnet50
from ember.models.small import MLP, LeNet5, lenet5, mlp
from ember.models.summary import ModelSummary, summary
from ember.models.transformer_lm import TransformerLM, transformer_lm
from ember.models.vgg import VGG, vgg11, vgg11_bn, vgg16, vgg16_bn, vgg19, vgg19_bn

__all__ = [
    "MLP", "NCF", "VGG", "AlexNet", "BasicBlock", "Bottleneck", "CifarResNet", "LSTMClassifier", "LeNet5",
    "MobileNetV2", "ModelSummary", "ResNet", "TransformerLM", "alexnet", "default_input_size", "get_model",
    "lenet5", "list_models", "lstm_classifier", "mlp", "mobilenet_v2", "ncf", "resnet18", "resnet18_cifar",
    "resnet20", "resnet34", "resnet50", "summary", "transformer_lm", "vgg11", "vgg11_bn", "vgg16", "vgg16_bn",
    "vgg19", "vgg19_bn",
]
