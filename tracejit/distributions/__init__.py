"""tracejit.distributions: PyTorch's torch.distributions over tracejit tensors (eager and traced alike).

Normal, LogNormal, Uniform, Laplace, Exponential, Cauchy, Gumbel, HalfNormal, HalfCauchy, MultivariateNormal
(reparameterized: rsample carries gradients to the parameters), StudentT (rsample reparameterized in loc and scale),
Gamma, Chi2, Beta, Dirichlet (sample only: their rsample raises NotImplementedError), Bernoulli, Categorical,
OneHotCategorical, Poisson, Binomial, Geometric, Multinomial, Independent, MixtureSameFamily; kl_divergence with
register_kl. Not provided: TransformedDistribution and transforms, and the rarer families."""
from . import constraints
from .distribution import Distribution
from .continuous import Normal, LogNormal, Uniform, Laplace, Exponential, Cauchy, Gumbel, HalfNormal, HalfCauchy
from .discrete import Bernoulli, Categorical, OneHotCategorical
from .counts import Poisson, Binomial, Geometric, Multinomial
from .gamma import Gamma, Chi2, Beta, Dirichlet, StudentT
from .multivariate_normal import MultivariateNormal
from .independent import Independent, MixtureSameFamily
from .kl import kl_divergence, register_kl

__all__ = ["Distribution", "Normal", "LogNormal", "Uniform", "Laplace", "Exponential", "Cauchy", "Gumbel",
           "HalfNormal", "HalfCauchy", "Bernoulli", "Categorical", "OneHotCategorical", "Poisson", "Binomial",
           "Geometric", "Multinomial", "Gamma", "Chi2", "Beta", "Dirichlet", "StudentT", "MultivariateNormal",
           "Independent", "MixtureSameFamily", "kl_divergence", "register_kl", "constraints"]
