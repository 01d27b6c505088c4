"""Module: the base class of layers and models, with PyTorch's registration, traversal and state_dict.

Attribute assignment registers what it assigns: a Parameter goes to `_parameters`, a Module to `_modules`,
a Buffer (or a tensor assigned over an existing buffer) to `_buffers`. Traversals and `state_dict()` walk
these dicts in registration order, own entries before children's, so keys come out in PyTorch's order.

Calling a module notes it (and its train/eval mode) with an active tracer: the mode is part of a traced
function's signature, because Dropout and BatchNorm compute differently in each.
"""
import itertools
from collections import OrderedDict, namedtuple

from ..._state import STATE
from ..._tensor import Tensor
from ...autograd.function import Function
from ...autograd.graph import RemovableHandle
from ..parameter import Buffer, Parameter


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


def _addindent(s, num_spaces):
    lines = s.split("\n")
    if len(lines) == 1:
        return s
    first = lines.pop(0)
    return first + "\n" + "\n".join((num_spaces * " ") + line for line in lines)


_hook_ids = itertools.count()


class Module:
    training: bool
    _version = 1

    def __init__(self, *args, **kwargs):
        if args or kwargs:
            raise TypeError(f"{type(self).__name__}.__init__() got unexpected arguments; Module.__init__ takes none")
        d = self.__dict__
        d["training"] = True
        d["_parameters"] = {}
        d["_buffers"] = {}
        d["_non_persistent_buffers_set"] = set()
        d["_modules"] = {}
        d["_forward_hooks"] = OrderedDict()
        d["_forward_hooks_with_kwargs"] = {}
        d["_forward_pre_hooks"] = OrderedDict()
        d["_forward_pre_hooks_with_kwargs"] = {}
        d["_backward_hooks"] = OrderedDict()
        d["_backward_pre_hooks"] = OrderedDict()

    def forward(self, *input):
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    # ------------------------------------------------------------------ registration
    def _check_name(self, name, kind):
        if not isinstance(name, str):
            raise TypeError(f"{kind} name should be a string. Got {type(name).__name__}")
        if "." in name:
            raise KeyError(f'{kind} name can\'t contain ".", got: {name}')
        if name == "":
            raise KeyError(f'{kind} name can\'t be empty string ""')

    def register_buffer(self, name, tensor, persistent=True):
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        self._check_name(name, "buffer")
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' "
                            "(torch Tensor or None required)")
        if isinstance(tensor, Buffer):
            tensor = _plain(tensor)
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def register_parameter(self, name, param):
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        self._check_name(name, "parameter")
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is None:
            self._parameters[name] = None
            return
        if not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{type(param).__name__}' object to parameter '{name}' "
                            "(torch.nn.Parameter or None required)")
        if param.grad_fn is not None:
            raise ValueError(f"Cannot assign non-leaf Tensor to parameter '{name}'. Model parameters must be "
                             f"created explicitly. To express '{name}' as a function of another Tensor, compute "
                             "the value in the forward() method.")
        self._parameters[name] = param

    def add_module(self, name, module):
        if not isinstance(module, Module) and module is not None:
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        if not isinstance(name, str):
            raise TypeError(f"module name should be a string. Got {type(name).__name__}")
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        if "." in name:
            raise KeyError(f'module name can\'t contain ".", got: {name}')
        if name == "":
            raise KeyError('module name can\'t be empty string ""')
        self._modules[name] = module

    register_module = add_module

    def __setattr__(self, name, value):
        d = self.__dict__

        def remove_from(*dicts_or_sets):
            for ds in dicts_or_sets:
                if name in ds:
                    if isinstance(ds, dict):
                        del ds[name]
                    else:
                        ds.discard(name)

        params = d.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            remove_from(d, self._buffers, self._modules, self._non_persistent_buffers_set)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                                "(torch.nn.Parameter or None expected)")
            self.register_parameter(name, value)
        else:
            modules = d.get("_modules")
            if isinstance(value, Module):
                if modules is None:
                    raise AttributeError("cannot assign module before Module.__init__() call")
                remove_from(d, self._parameters, self._buffers, self._non_persistent_buffers_set)
                modules[name] = value
            elif modules is not None and name in modules:
                if value is not None:
                    raise TypeError(f"cannot assign '{type(value).__name__}' as child module '{name}' "
                                    "(torch.nn.Module or None expected)")
                modules[name] = value
            else:
                buffers = d.get("_buffers")
                if isinstance(value, Buffer) or (buffers is not None and name in buffers):
                    if value is not None and not isinstance(value, Tensor):
                        raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}' "
                                        "(torch.nn.Buffer, torch.Tensor or None expected)")
                    if isinstance(value, Buffer):
                        persistent = value.__dict__.get("persistent", True)
                    else:
                        persistent = name not in self._non_persistent_buffers_set
                    remove_from(d, self._parameters, self._modules)
                    self.register_buffer(name, value, persistent)
                else:
                    object.__setattr__(self, name, value)

    def __getattr__(self, name):
        d = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            s = d.get(store)
            if s is not None and name in s:
                return s[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        for store in (self._parameters, self._buffers, self._modules):
            if name in store:
                del store[name]
                self._non_persistent_buffers_set.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        keys = list(object.__dir__(self)) + list(self._parameters) + list(self._modules) + list(self._buffers)
        return sorted(k for k in set(keys) if not k[0].isdigit())

    def __setstate__(self, state):
        self.__dict__.update(state)

    # ------------------------------------------------------------------ calling
    def __call__(self, *args, **kwargs):
        if STATE.tracer is not None:
            STATE.tracer.note_module(self)
        if self._forward_pre_hooks:
            for hid, hook in list(self._forward_pre_hooks.items()):
                if hid in self._forward_pre_hooks_with_kwargs:
                    r = hook(self, args, kwargs)
                    if r is not None:
                        if not (isinstance(r, tuple) and len(r) == 2):
                            raise RuntimeError("forward pre-hook must return None or a tuple of (new_args, "
                                               f"new_kwargs), but got {r}.")
                        args, kwargs = r
                else:
                    r = hook(self, args)
                    if r is not None:
                        args = r if isinstance(r, tuple) else (r,)
        hooked = self.__dict__.get("_backward_hooks") or self.__dict__.get("_backward_pre_hooks")
        if hooked:
            args, state = _BackwardHooks.wrap_inputs(self, args)
        result = self.forward(*args, **kwargs)
        if self._forward_hooks:
            for hid, hook in list(self._forward_hooks.items()):
                if hid in self._forward_hooks_with_kwargs:
                    r = hook(self, args, kwargs, result)
                else:
                    r = hook(self, args, result)
                if r is not None:
                    result = r
        if hooked:
            result = _BackwardHooks.wrap_outputs(state, result)
        return result

    def _hook(self, store, kw_store, hook, prepend, with_kwargs):
        hid = next(_hook_ids)
        store[hid] = hook
        if with_kwargs:
            kw_store[hid] = True
        if prepend:
            store.move_to_end(hid, last=False)

        class _Handle(RemovableHandle):
            def remove(handle_self):
                store.pop(hid, None)
                kw_store.pop(hid, None)
        return _Handle(store, hid)

    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        """hook(module, args) -> None or new args; with_kwargs: hook(module, args, kwargs) -> None or (args, kwargs)."""
        return self._hook(self._forward_pre_hooks, self._forward_pre_hooks_with_kwargs, hook, prepend, with_kwargs)

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False, always_call=False):
        """hook(module, args, output) -> None or new output (with_kwargs: hook(module, args, kwargs, output))."""
        return self._hook(self._forward_hooks, self._forward_hooks_with_kwargs, hook, prepend, with_kwargs)

    def register_full_backward_hook(self, hook, prepend=False):
        """hook(module, grad_input, grad_output) -> None or new grad_input, called when the gradients with respect
        to the module's positional tensor inputs are computed (grad_input: one entry per such input, None where
        it needs none; grad_output: one per tensor output)."""
        return self._hook(self.__dict__.setdefault("_backward_hooks", OrderedDict()), {}, hook, prepend, False)

    def register_full_backward_pre_hook(self, hook, prepend=False):
        """hook(module, grad_output) -> None or new grad_output, called when the gradients with respect to the
        module's outputs are computed, before those with respect to its inputs."""
        return self._hook(self.__dict__.setdefault("_backward_pre_hooks", OrderedDict()), {}, hook, prepend, False)

    # ------------------------------------------------------------------ traversal
    def _named_members(self, get_members_fn, prefix="", recurse=True, remove_duplicate=True):
        memo = set()
        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse \
            else [(prefix, self)]
        for module_prefix, module in modules:
            for k, v in get_members_fn(module):
                if v is None or (remove_duplicate and id(v) in memo):
                    continue
                if remove_duplicate:
                    memo.add(id(v))
                yield (module_prefix + ("." if module_prefix else "") + k, v)

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members(lambda m: m._parameters.items(), prefix, recurse, remove_duplicate)

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members(lambda m: m._buffers.items(), prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def named_children(self):
        memo = set()
        for name, module in self._modules.items():
            if module is not None and id(module) not in memo:
                memo.add(id(module))
                yield name, module

    def children(self):
        for _, m in self.named_children():
            yield m

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        if memo is None:
            memo = set()
        if id(self) in memo:
            return
        if remove_duplicate:
            memo.add(id(self))
        yield prefix, self
        for name, module in self._modules.items():
            if module is None:
                continue
            sub = prefix + ("." if prefix else "") + name
            yield from module.named_modules(memo, sub, remove_duplicate)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def get_submodule(self, target):
        if target == "":
            return self
        mod = self
        for item in target.split("."):
            if not hasattr(mod, item):
                raise AttributeError(f"{mod._get_name()} has no attribute `{item}`")
            mod = getattr(mod, item)
            if not isinstance(mod, Module):
                raise AttributeError(f"`{item}` is not an nn.Module")
        return mod

    def get_parameter(self, target):
        path, _, name = target.rpartition(".")
        mod = self.get_submodule(path)
        if not hasattr(mod, name):
            raise AttributeError(f"{mod._get_name()} has no attribute `{name}`")
        p = getattr(mod, name)
        if not isinstance(p, Parameter):
            raise AttributeError(f"`{name}` is not an nn.Parameter")
        return p

    def get_buffer(self, target):
        path, _, name = target.rpartition(".")
        mod = self.get_submodule(path)
        if name not in mod._buffers:
            raise AttributeError(f"`{name}` is not a buffer")
        return mod._buffers[name]

    # ------------------------------------------------------------------ modes and bulk changes
    def train(self, mode=True):
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for m in self.children():
            m.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def apply(self, fn):
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        for p in self.parameters():
            if p.grad is not None:
                if set_to_none:
                    p.grad = None
                else:
                    g = p.grad
                    if g.grad_fn is not None:
                        g.detach_()
                    else:
                        g.requires_grad_(False)
                    g.zero_()

    def _apply(self, fn):
        """Replace every parameter's data and every buffer by fn(tensor), keeping Parameter identities."""
        for m in self.children():
            m._apply(fn)
        from ...autograd.grad_mode import no_grad
        with no_grad():
            for key, p in self._parameters.items():
                if p is None:
                    continue
                new = fn(p)
                if new is not p:
                    p.data = new
                    if p.grad is not None:
                        p._grad = fn(p.grad)
            for key, b in self._buffers.items():
                if b is not None:
                    self._buffers[key] = fn(b)
        return self

    def to(self, *args, **kwargs):
        from ... import _dtype as D
        from ..._tensor import check_device
        dtype = kwargs.get("dtype")
        device = kwargs.get("device")
        for a in args:
            if isinstance(a, Tensor):
                dtype, device = a.dtype, a.device
            elif isinstance(a, D.dtype):
                dtype = a
            elif a is not None:
                device = a
        check_device(device)
        if device is not None:      # parameters keep their identity: their .data (and .grad) move
            self._apply(lambda t: t.to(device=device))
        fmt = kwargs.get("memory_format")
        if fmt is not None:         # PyTorch: 4-d (5-d) floating-point tensors take the layout
            from ... import _memory_format as M
            rank = {"channels_last": 4, "channels_last_3d": 5}.get(M.check(fmt).name)
            self._apply(lambda t: t.contiguous(memory_format=fmt) if t.is_floating_point() and
                        (rank is None or t.dim() == rank) and fmt is not M.preserve_format else t)
        if dtype is not None:
            dtype = D.to_dtype(dtype)
            if not dtype.is_floating_point:
                raise TypeError(f"nn.Module.to only accepts floating point dtypes, but got desired dtype={dtype}")
            return self._apply(lambda t: t.to(dtype) if t.is_floating_point() else t)
        return self

    def float(self):
        from ... import _dtype as D
        return self._apply(lambda t: t.to(D.float32) if t.is_floating_point() else t)

    def double(self):
        from ... import _dtype as D
        return self._apply(lambda t: t.to(D.float64) if t.is_floating_point() else t)

    def half(self):
        from ... import _dtype as D
        return self._apply(lambda t: t.to(D.float16) if t.is_floating_point() else t)

    def type(self, dst_type):
        return self._apply(lambda t: t.to(dst_type))

    def cpu(self):
        return self.to("cpu")

    def cuda(self, device=None):
        return self.to("cuda" if device is None else device)

    def share_memory(self):
        return self

    # ------------------------------------------------------------------ state_dict
    def _save_to_state_dict(self, destination, prefix, keep_vars):
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars else b.detach()

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        if args:  # the deprecated positional form state_dict(destination, prefix, keep_vars)
            destination = args[0]
            if len(args) > 1:
                prefix = args[1]
            if len(args) > 2:
                keep_vars = args[2]
        if destination is None:
            destination = OrderedDict()
            destination._metadata = OrderedDict()
        meta = getattr(destination, "_metadata", None)
        if meta is not None:
            meta[prefix[:-1]] = {"version": self._version}
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars)
        return destination

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        from ...autograd.grad_mode import no_grad
        persistent = {k: v for k, v in self._buffers.items() if k not in self._non_persistent_buffers_set}
        local_state = {k: v for k, v in itertools.chain(self._parameters.items(), persistent.items())
                       if v is not None}
        for name, param in local_state.items():
            key = prefix + name
            if key not in state_dict:
                if strict:
                    missing_keys.append(key)
                continue
            input_param = state_dict[key]
            if not isinstance(input_param, Tensor):
                error_msgs.append(f'While copying the parameter named "{key}", expected torch.Tensor or '
                                  f"Tensor-like object from checkpoint but received {type(input_param)}")
                continue
            if tuple(input_param.shape) != tuple(param.shape):
                error_msgs.append(f"size mismatch for {key}: copying a param with shape {input_param.shape} from "
                                  f"checkpoint, the shape in current model is {param.shape}.")
                continue
            try:
                if local_metadata.get("assign_to_params_buffers", False):
                    # assign=True: the module takes the checkpoint's tensors themselves
                    if name in self._parameters:
                        setattr(self, name, Parameter(input_param.detach(), requires_grad=param.requires_grad))
                    else:
                        self._buffers[name] = input_param
                else:
                    with no_grad():
                        param.copy_(input_param)
            except Exception as ex:  # noqa: BLE001  (reported like PyTorch, with the key)
                error_msgs.append(f'While copying the parameter named "{key}", whose dimensions in the model are '
                                  f"{param.shape} and whose dimensions in the checkpoint are {input_param.shape}, "
                                  f"an exception occurred : {ex.args}.")
        if strict:
            for key in state_dict.keys():
                if key.startswith(prefix):
                    input_name = key[len(prefix):].split(".", 1)
                    if len(input_name) > 1:
                        if input_name[0] not in self._modules:
                            unexpected_keys.append(key)
                    elif input_name[0] not in local_state:
                        unexpected_keys.append(key)

    def load_state_dict(self, state_dict, strict=True, assign=False):
        if not isinstance(state_dict, dict):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        missing_keys, unexpected_keys, error_msgs = [], [], []
        metadata = getattr(state_dict, "_metadata", None)
        state_dict = OrderedDict(state_dict)
        if metadata is not None:
            state_dict._metadata = metadata

        def load(module, local_state_dict, prefix=""):
            local_metadata = dict({} if metadata is None else metadata.get(prefix[:-1], {}))
            if assign:
                local_metadata["assign_to_params_buffers"] = True
            module._load_from_state_dict(local_state_dict, prefix, local_metadata, True, missing_keys,
                                         unexpected_keys, error_msgs)
            for name, child in module._modules.items():
                if child is not None:
                    child_prefix = prefix + name + "."
                    child_state = {k: v for k, v in local_state_dict.items() if k.startswith(child_prefix)}
                    load(child, child_state, child_prefix)

        load(self, state_dict)
        if strict:
            if unexpected_keys:
                error_msgs.insert(0, "Unexpected key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in unexpected_keys)))
            if missing_keys:
                error_msgs.insert(0, "Missing key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in missing_keys)))
        if error_msgs:
            raise RuntimeError("Error(s) in loading state_dict for {}:\n\t{}".format(
                self._get_name(), "\n\t".join(error_msgs)))
        return _IncompatibleKeys(missing_keys, unexpected_keys)

    # ------------------------------------------------------------------ printing
    def _get_name(self):
        return type(self).__name__

    def extra_repr(self):
        return ""

    def __repr__(self):
        extra_lines = []
        extra = self.extra_repr()
        if extra:
            extra_lines = extra.split("\n")
        child_lines = []
        for key, module in self._modules.items():
            mod_str = _addindent(repr(module), 2)
            child_lines.append("(" + key + "): " + mod_str)
        lines = extra_lines + child_lines
        main = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                main += extra_lines[0]
            else:
                main += "\n  " + "\n  ".join(lines) + "\n"
        return main + ")"


def _plain(t):
    """A Buffer marker's tensor as a plain Tensor sharing its data."""
    out = object.__new__(Tensor)
    out._init(t._data)
    out._value = t._value
    out._version = t._version
    out._requires_grad = t._requires_grad
    return out


class _BackwardHooks:
    """A module's full backward (pre-)hooks, as PyTorch runs them: its positional tensor inputs and its tensor
    outputs that require grad pass through identity autograd Functions; the outputs' one receives grad_output (the
    pre-hooks may replace it), the inputs' one grad_input (the hooks may replace it). Both tuples have an entry
    per tensor, None for one that requires no grad; where no input requires one, the hooks are called from the
    outputs' Function with grad_input all None."""

    def __init__(self, module, in_grad):
        self.module, self.in_grad, self.out_grad, self.grad_output = module, in_grad, (), None
        self.in_zeros = ()

    @staticmethod
    def _through(fn, state, tensors):
        """tensors (positional values) with those that require grad replaced by fn's identity outputs, and the
        requires-grad mask of the tensors among them."""
        idx = [i for i, a in enumerate(tensors) if isinstance(a, Tensor)]
        mask = tuple(tensors[i].requires_grad for i in idx)
        grad_idx = [i for i, g in zip(idx, mask) if g]
        if grad_idx:
            new = fn.apply(state, *(tensors[i] for i in grad_idx))
            tensors = list(tensors)
            for i, t in zip(grad_idx, new if isinstance(new, tuple) else (new,)):
                tensors[i] = t
        return tuple(tensors), mask

    @classmethod
    def wrap_inputs(cls, module, args):
        state = cls(module, ())
        args, state.in_grad = cls._through(_HookInputs, state, args)
        # (PyTorch hands the hooks zeros for a tensor input that requires no grad beside one that does)
        state.in_zeros = tuple((tuple(a.shape), a.dtype) for a in args if isinstance(a, Tensor))
        return args, state

    @classmethod
    def wrap_outputs(cls, state, result):
        outs, state.out_grad = cls._through(_HookOutputs, state, result if isinstance(result, tuple) else (result,))
        return outs if isinstance(result, tuple) else outs[0]

    @staticmethod
    def _full(mask, grads):
        it = iter(grads)
        return tuple(next(it) if g else None for g in mask)

    def call_hooks(self, grads):
        """The hooks on grad_input (the inputs' gradients `grads`, in mask order); the gradients to pass on."""
        grad_input = self._full(self.in_grad, grads)
        if any(self.in_grad):
            from ...creation import zeros
            grad_input = tuple(zeros(s, dtype=d) if g is None else g for g, (s, d) in zip(grad_input, self.in_zeros))
        for hook in list(self.module.__dict__.get("_backward_hooks", {}).values()):
            r = hook(self.module, grad_input, self.grad_output)
            if r is not None:
                r = r if isinstance(r, tuple) else (r,)
                if len(r) != len(grad_input):
                    raise RuntimeError(f"Backward hook returned an invalid number of grad_input, got {len(r)}, "
                                       f"but expected {len(grad_input)}")
                grad_input = r
        return tuple(g for g, m in zip(grad_input, self.in_grad) if m)


class _HookIdentity(Function):
    """The tensors as they are; the backward hands their gradients to the _BackwardHooks `state`."""

    @staticmethod
    def forward(ctx, state, *tensors):
        ctx.state = state
        return tensors


class _HookOutputs(_HookIdentity):
    @staticmethod
    def backward(ctx, *grads):
        state = ctx.state
        grad_output = state._full(state.out_grad, grads)
        for hook in list(state.module.__dict__.get("_backward_pre_hooks", {}).values()):
            r = hook(state.module, grad_output)
            if r is not None:
                grad_output = r if isinstance(r, tuple) else (r,)
        state.grad_output = grad_output
        if not any(state.in_grad):
            state.call_hooks(())
        return (None,) + tuple(g for g, m in zip(grad_output, state.out_grad) if m)


class _HookInputs(_HookIdentity):
    @staticmethod
    def backward(ctx, *grads):
        return (None,) + ctx.state.call_hooks(grads)
