"""tracejit.distributions: PyTorch's torch.distributions over tracejit tensors (eager and traced alike).

Normal, LogNormal, Uniform, Laplace, Exponential (reparameterized: rsample carries gradients to the parameters),
Bernoulli, Categorical, OneHotCategorical, Independent, MixtureSameFamily; kl_divergence with register_kl.
Not provided: distributions whose sampling or densities need special functions tracejit has no op for (Gamma, Beta,
Dirichlet, Poisson, StudentT...), TransformedDistribution and transforms."""
from . import constraints
from .distribution import Distribution
from .continuous import Normal, LogNormal, Uniform, Laplace, Exponential
from .discrete import Bernoulli, Categorical, OneHotCategorical
from .independent import Independent, MixtureSameFamily
from .kl import kl_divergence, register_kl

__all__ = ["Distribution", "Normal", "LogNormal", "Uniform", "Laplace", "Exponential", "Bernoulli", "Categorical",
           "OneHotCategorical", "Independent", "MixtureSameFamily", "kl_divergence", "register_kl", "constraints"]
