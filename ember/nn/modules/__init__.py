"""Every layer class of ember.nn, one family per file.

Attention (MultiheadAttention, Transformer*) belongs in attention.py / transformer.py and the
recurrent layers (RNN, LSTM, GRU) in rnn.py; export them here when they exist.
"""

from ember.nn.modules.activation import (
    CELU,
    ELU,
    GELU,
    GLU,
    SELU,
    Hardshrink,
    Hardsigmoid,
    Hardswish,
    Hardtanh,
    LeakyReLU,
    LogSigmoid,
    LogSoftmax,
    Mish,
    PReLU,
    ReLU,
    ReLU6,
    RReLU,
    Sigmoid,
    SiLU,
    Softmax,
    Softmax2d,
    Softmin,
    Softplus,
    Softshrink,
    Softsign,
    Tanh,
    Tanhshrink,
    Threshold,
)
from ember.nn.modules.adaptive import AdaptiveLogSoftmaxWithLoss
from ember.nn.modules.attention import MultiheadAttention
from ember.nn.modules.batchnorm import (
    BatchNorm1d,
    BatchNorm2d,
    BatchNorm3d,
    InstanceNorm1d,
    InstanceNorm2d,
    InstanceNorm3d,
)
from ember.nn.modules.container import ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential
from ember.nn.modules.conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from ember.nn.modules.cross_map_lrn import CrossMapLRN2d
from ember.nn.modules.data_parallel import DataParallel
from ember.nn.modules.distance import CosineSimilarity, PairwiseDistance
from ember.nn.modules.dropout import AlphaDropout, Dropout, Dropout1d, Dropout2d, Dropout3d, FeatureAlphaDropout
from ember.nn.modules.flatten import Flatten, Fold, Unflatten, Unfold
from ember.nn.modules.fractional_pool import FractionalMaxPool2d, FractionalMaxPool3d
from ember.nn.modules.graph import GATConv, GCNConv, SAGEConv
from ember.nn.modules.lazy import (
    LazyConv1d,
    LazyConv2d,
    LazyConv3d,
    LazyConvTranspose1d,
    LazyConvTranspose2d,
    LazyConvTranspose3d,
    LazyLinear,
)
from ember.nn.modules.lazy_norm import (
    LazyBatchNorm1d,
    LazyBatchNorm2d,
    LazyBatchNorm3d,
    LazyInstanceNorm1d,
    LazyInstanceNorm2d,
    LazyInstanceNorm3d,
)
from ember.nn.modules.linear import Bilinear, Identity, Linear
from ember.nn.modules.loss import (
    BCELoss,
    BCEWithLogitsLoss,
    CosineEmbeddingLoss,
    CrossEntropyLoss,
    CTCLoss,
    GaussianNLLLoss,
    HingeEmbeddingLoss,
    HuberLoss,
    KLDivLoss,
    L1Loss,
    MarginRankingLoss,
    MSELoss,
    MultiLabelMarginLoss,
    MultiLabelSoftMarginLoss,
    MultiMarginLoss,
    NLLLoss,
    NLLLoss2d,
    PoissonNLLLoss,
    SmoothL1Loss,
    SoftMarginLoss,
    TripletMarginLoss,
    TripletMarginWithDistanceLoss,
)
from ember.nn.modules.module import Module
from ember.nn.modules.normalization import GroupNorm, LayerNorm, LocalResponseNorm, RMSNorm
from ember.nn.modules.padding import (
    CircularPad1d,
    CircularPad2d,
    CircularPad3d,
    ConstantPad1d,
    ConstantPad2d,
    ConstantPad3d,
    ReflectionPad1d,
    ReflectionPad2d,
    ReflectionPad3d,
    ReplicationPad1d,
    ReplicationPad2d,
    ReplicationPad3d,
    ZeroPad1d,
    ZeroPad2d,
    ZeroPad3d,
)
from ember.nn.modules.pooling import (
    AdaptiveAvgPool1d,
    AdaptiveAvgPool2d,
    AdaptiveAvgPool3d,
    AdaptiveMaxPool1d,
    AdaptiveMaxPool2d,
    AdaptiveMaxPool3d,
    AvgPool1d,
    AvgPool2d,
    AvgPool3d,
    LPPool1d,
    LPPool2d,
    LPPool3d,
    MaxPool1d,
    MaxPool2d,
    MaxPool3d,
    MaxUnpool1d,
    MaxUnpool2d,
    MaxUnpool3d,
)
from ember.nn.modules.rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell, RNNCellBase
from ember.nn.modules.sparse import Embedding, EmbeddingBag
from ember.nn.modules.transformer import (
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)
from ember.nn.modules.upsampling import (
    ChannelShuffle,
    PixelShuffle,
    PixelUnshuffle,
    Upsample,
    UpsamplingBilinear2d,
    UpsamplingNearest2d,
)
from ember.nn.parameter import UninitializedBuffer, UninitializedParameter

__all__ = [
    "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveMaxPool2d", "AvgPool1d", "AvgPool2d", "BCELoss",
    "BCEWithLogitsLoss", "BatchNorm1d", "BatchNorm2d", "Bilinear", "CELU", "Conv1d", "Conv2d", "ConvTranspose1d",
    "ConvTranspose2d", "CosineEmbeddingLoss", "CrossEntropyLoss", "Dropout", "Dropout1d", "Dropout2d", "ELU",
    "Embedding", "Flatten", "GELU", "GLU", "GaussianNLLLoss", "GroupNorm", "Hardsigmoid", "Hardswish", "Hardtanh",
    "HingeEmbeddingLoss", "HuberLoss", "Identity", "InstanceNorm1d", "InstanceNorm2d", "KLDivLoss", "L1Loss",
    "LayerNorm", "LeakyReLU", "Linear", "LogSigmoid", "LogSoftmax", "MSELoss", "MarginRankingLoss", "MaxPool1d",
    "MaxPool2d", "Mish", "Module", "ModuleDict", "ModuleList", "NLLLoss", "PReLU", "ParameterDict", "ParameterList",
    "PoissonNLLLoss", "RMSNorm", "ReLU", "ReLU6", "SELU", "Sequential", "SiLU", "Sigmoid", "SmoothL1Loss",
    "SoftMarginLoss", "Softmax", "Softmin", "Softplus", "Softsign", "Tanh", "Tanhshrink", "Threshold", "Unflatten",
    "Upsample", "MultiLabelSoftMarginLoss", "PixelShuffle", "PixelUnshuffle", "TripletMarginLoss", "Fold", "Unfold",
    "LPPool1d", "LPPool2d", "LocalResponseNorm",
    "AdaptiveMaxPool1d", "AlphaDropout", "ChannelShuffle", "CircularPad1d", "CircularPad2d", "CircularPad3d",
    "ConstantPad1d", "ConstantPad2d", "ConstantPad3d", "CosineSimilarity", "Dropout3d", "FeatureAlphaDropout",
    "Hardshrink", "PairwiseDistance", "RReLU", "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d",
    "ReplicationPad1d", "ReplicationPad2d", "ReplicationPad3d", "Softmax2d", "Softshrink", "UpsamplingBilinear2d",
    "UpsamplingNearest2d", "ZeroPad1d", "ZeroPad2d", "ZeroPad3d",
    "AdaptiveAvgPool3d", "AdaptiveMaxPool3d", "AvgPool3d", "BatchNorm3d", "Conv3d", "ConvTranspose3d",
    "InstanceNorm3d", "LPPool3d", "MaxPool3d",
    "CTCLoss", "EmbeddingBag", "MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d", "MultiLabelMarginLoss", "MultiMarginLoss",
    "TripletMarginWithDistanceLoss", "DataParallel", "NLLLoss2d",
    "LazyConv1d", "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d", "LazyConvTranspose2d", "LazyConvTranspose3d",
    "LazyLinear", "UninitializedParameter", "UninitializedBuffer",
    "LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d", "LazyInstanceNorm1d", "LazyInstanceNorm2d",
    "LazyInstanceNorm3d", "FractionalMaxPool2d", "FractionalMaxPool3d", "AdaptiveLogSoftmaxWithLoss", "CrossMapLRN2d",
    "MultiheadAttention", "Transformer", "TransformerDecoder", "TransformerDecoderLayer", "TransformerEncoder",
    "TransformerEncoderLayer",
    "GRU", "GRUCell", "LSTM", "LSTMCell", "RNN", "RNNBase", "RNNCell", "RNNCellBase",
    "GATConv", "GCNConv", "SAGEConv",
]
