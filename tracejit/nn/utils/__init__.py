"""nn.utils: gradient clipping, parameter/vector conversion, rnn.pad_sequence, weight_norm (the hook form and the
parametrization), spectral_norm (the hook form), parametrize."""
from .clip_grad import clip_grad_norm_, clip_grad_norm, clip_grad_value_, get_total_norm, clip_grads_with_norm_
from .convert_parameters import parameters_to_vector, vector_to_parameters
from .weight_norm import weight_norm, remove_weight_norm
from .spectral_norm import spectral_norm, remove_spectral_norm
from . import rnn, parametrize, parametrizations  # noqa: E402
