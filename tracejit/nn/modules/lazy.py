"""Lazy modules: parameters whose shapes come from the first input (PyTorch's LazyModuleMixin flow).

An UninitializedParameter (defined in tracejit.nn.parameter, with UninitializedBuffer) holds no data: any use of it
raises, except listing it (module.parameters(), an optimizer, state_dict). At the first call a forward pre-hook asks
the module to `materialize` each one with the input's shape: the same object becomes an ordinary Parameter, so an
optimizer built before the call updates it. The module then becomes its eager class (LazyLinear -> Linear).
"""
from ..parameter import UninitializedBuffer, UninitializedParameter, is_lazy  # noqa: F401


def _infer_parameters(module, args):
    module.initialize_parameters(*args)
    if module.has_uninitialized_params():
        raise RuntimeError(f"module {module._get_name()} has not been fully initialized")
    module._initialize_hook.remove()
    del module._initialize_hook
    if module.cls_to_become is not None:
        module.__class__ = module.cls_to_become


class LazyModuleMixin:
    """Mixed in before the eager class: registers the first-call hook; state_dict keeps the lazy parameters and
    buffers as they are, and load_state_dict gives them the loaded shapes first."""
    cls_to_become = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._initialize_hook = self.register_forward_pre_hook(_infer_parameters)

    def has_uninitialized_params(self):
        return any(is_lazy(p) for p in list(self._parameters.values()) + list(self._buffers.values()))

    def initialize_parameters(self, *args, **kwargs):
        raise NotImplementedError(f"initialize_parameters is not implemented for {type(self).__name__}")

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars or is_lazy(p) else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars or is_lazy(b) else b.detach()

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        for name, p in list(self._parameters.items()) + list(self._buffers.items()):
            key = prefix + name
            if is_lazy(p) and key in state_dict and not is_lazy(state_dict[key]):
                p.materialize(state_dict[key].shape)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)
