"""tracejit.optim: optimizers and learning-rate schedulers (PyTorch's torch.optim)."""
from .optimizer import Optimizer
from .sgd import SGD
from .adam import Adam, AdamW
from .rmsprop import RMSprop
from .adaptive import Adagrad, Adadelta, Adamax, NAdam, RAdam, Rprop
from .lbfgs import LBFGS
from . import lr_scheduler
