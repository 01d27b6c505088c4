"""parameters_to_vector / vector_to_parameters."""
from ..._tensor import Tensor
from ...ops import shape_ops as S


def parameters_to_vector(parameters):
    return S.cat([S.reshape(p, (-1,)) for p in parameters])


def vector_to_parameters(vec, parameters):
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected torch.Tensor, but got: {type(vec).__name__}")
    pointer = 0
    for param in parameters:
        n = param.numel()
        param.data = S.reshape(vec[pointer:pointer + n], tuple(param.shape)).data
        pointer += n
