from .module import Module
from .container import Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict
from .linear import Identity, Linear, Bilinear, LazyLinear
from .activation import (ReLU, ReLU6, Threshold, LeakyReLU, GELU, SiLU, ELU, Tanh, Sigmoid, Softplus, Mish, Hardtanh, Hardswish,
                         Hardsigmoid, LogSigmoid, Softsign, Tanhshrink, Softmax, LogSoftmax, Softmin,
                         SELU, CELU, GLU, Hardshrink, Softshrink, RReLU, Softmax2d)
from .dropout import Dropout, Dropout1d, Dropout2d, AlphaDropout, FeatureAlphaDropout
from .flatten import Flatten, Unflatten
from .sparse import Embedding, EmbeddingBag
from .normalization import LayerNorm, GroupNorm, LocalResponseNorm
from .batchnorm import (BatchNorm1d, BatchNorm2d, BatchNorm3d, SyncBatchNorm, LazyBatchNorm1d, LazyBatchNorm2d,
                        LazyBatchNorm3d)
from .instancenorm import (InstanceNorm1d, InstanceNorm2d, InstanceNorm3d, LazyInstanceNorm1d, LazyInstanceNorm2d,
                           LazyInstanceNorm3d)
from .conv import (Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d, LazyConv1d,
                   LazyConv2d, LazyConv3d)
from .pooling import (MaxPool1d, MaxPool2d, AvgPool1d, AvgPool2d, AdaptiveAvgPool1d, AdaptiveAvgPool2d,
                      AdaptiveMaxPool1d, AdaptiveMaxPool2d, LPPool1d, LPPool2d, MaxPool3d, AvgPool3d, AdaptiveAvgPool3d,
                      LPPool3d, AdaptiveMaxPool3d, MaxUnpool1d, MaxUnpool2d, MaxUnpool3d)
from .loss import (L1Loss, MSELoss, SmoothL1Loss, HuberLoss, NLLLoss, CrossEntropyLoss, BCELoss, BCEWithLogitsLoss,
                   KLDivLoss, MarginRankingLoss, HingeEmbeddingLoss, SoftMarginLoss, MultiLabelSoftMarginLoss,
                   CosineEmbeddingLoss, TripletMarginLoss, TripletMarginWithDistanceLoss, MultiMarginLoss,
                   MultiLabelMarginLoss, PoissonNLLLoss, GaussianNLLLoss, CTCLoss)
from .rnn import RNNBase, RNN, LSTM, GRU, RNNCellBase, RNNCell, LSTMCell, GRUCell
from .transformer import (MultiheadAttention, TransformerEncoderLayer, TransformerDecoderLayer, TransformerEncoder,
                          TransformerDecoder, Transformer)
from .upsampling import Upsample
from .pixelshuffle import PixelShuffle, PixelUnshuffle, Unfold, Fold
from .distance import CosineSimilarity, PairwiseDistance
from .padding import (ZeroPad1d, ZeroPad2d, ZeroPad3d, ConstantPad1d, ConstantPad2d, ConstantPad3d, ReflectionPad1d,
                      ReflectionPad2d, ReflectionPad3d, ReplicationPad1d, ReplicationPad2d, ReplicationPad3d,
                      CircularPad1d, CircularPad2d, CircularPad3d)
from .channelshuffle import ChannelShuffle
from .lazy import LazyModuleMixin, UninitializedBuffer, UninitializedParameter
