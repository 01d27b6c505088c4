"""RNN, LSTM, GRU: PyTorch's modules (constructor arguments, parameter names and shapes, initialization,
input and state layouts), each layer and direction a `tracejit.scan` over time.

The input projection of a whole sequence is one matrix product before the loop (with both biases, except
GRU's, whose hidden bias sits inside its reset gate's product); each step does the hidden projection and the gate
math. A PackedSequence runs as its padded batch with a mask: a sequence's state stops changing after its last step
(and, in reverse, starts there), so each one's last hidden state is the state at its own length. LSTM's
`proj_size` P > 0 projects each step's hidden state by weight_hr (P, hidden_size): h, the output and the next
layer's input have size P, the cell state keeps hidden_size.
"""
import math

import numpy as np

from ... import creation as C
from ...ops.shape_ops import cat, stack
from ...scan import scan
from .. import functional as F, init
from ..parameter import Parameter
from .module import Module

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _step(mode, H, w_hh, b_hh, w_hr=None):
    """combine_fn for scan, and a cell's step: (state, projected input x_t) -> (new state, h_t). w_hr: LSTM's
    projection of h (proj_size), if any."""
    if mode == "LSTM":
        def step(state, gx):
            h, c = state
            i, f, g, o = (gx + F.linear(h, w_hh, b_hh)).chunk(4, -1)
            c = f.sigmoid() * c + i.sigmoid() * g.tanh()
            h = o.sigmoid() * c.tanh()
            if w_hr is not None:
                h = F.linear(h, w_hr)
            return (h, c), h
    elif mode == "GRU":
        def step(h, gx):
            gh = F.linear(h, w_hh, b_hh)
            r = (gx[..., :H] + gh[..., :H]).sigmoid()
            z = (gx[..., H:2 * H] + gh[..., H:2 * H]).sigmoid()
            n = (gx[..., 2 * H:] + r * gh[..., 2 * H:]).tanh()
            h = (1 - z) * n + z * h
            return h, h
    else:
        act = F.relu if mode == "RNN_RELU" else (lambda v: v.tanh())

        def step(h, gx):
            h = act(gx + F.linear(h, w_hh, b_hh))
            return h, h
    return step


def _masked(step):
    """step over (x_t, mask_t): where mask_t (B, 1) is False the state stays as it was (past a sequence's end)."""
    def masked_step(state, xs):
        gx, keep = xs
        new, y = step(state, gx)
        if isinstance(new, tuple):
            return tuple(n.where(keep, o) for n, o in zip(new, state)), y
        return new.where(keep, state), y
    return masked_step


class RNNBase(Module):
    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__()
        if not isinstance(hidden_size, int) or hidden_size <= 0:
            raise ValueError("hidden_size must be an integer greater than zero")
        if not isinstance(num_layers, int) or num_layers <= 0:
            raise ValueError("num_layers must be an integer greater than zero")
        if not (isinstance(dropout, (int, float)) and 0 <= dropout <= 1) or isinstance(dropout, bool):
            raise ValueError("dropout should be a number in range [0, 1] representing the probability of an "
                             "element being zeroed")
        if not isinstance(proj_size, int) or isinstance(proj_size, bool) or proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if proj_size and mode != "LSTM":
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        self.mode = mode
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout = bias, batch_first, float(dropout)
        self.bidirectional, self.proj_size = bidirectional, proj_size
        gate_size, real_hidden = _GATES[mode] * hidden_size, proj_size or hidden_size
        self._flat_weights_names = []
        for layer in range(num_layers):
            for suffix in ("", "_reverse")[:2 if bidirectional else 1]:
                size_in = input_size if layer == 0 else real_hidden * (2 if bidirectional else 1)
                names = [f"weight_ih_l{layer}{suffix}", f"weight_hh_l{layer}{suffix}"]
                shapes = [(gate_size, size_in), (gate_size, real_hidden)]
                if bias:
                    names += [f"bias_ih_l{layer}{suffix}", f"bias_hh_l{layer}{suffix}"]
                    shapes += [(gate_size,), (gate_size,)]
                if proj_size:
                    names.append(f"weight_hr_l{layer}{suffix}")
                    shapes.append((proj_size, hidden_size))
                for name, shape in zip(names, shapes):
                    setattr(self, name, Parameter(C.empty(shape, dtype=dtype, device=device)))
                self._flat_weights_names += names
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for w in self.parameters():
            init.uniform_(w, -stdv, stdv)

    @property
    def all_weights(self):
        return [getattr(self, n) for n in self._flat_weights_names]

    def _weights(self, layer, suffix):
        g = lambda n: getattr(self, f"{n}_l{layer}{suffix}", None)  # noqa: E731
        return g("weight_ih"), g("weight_hh"), g("bias_ih"), g("bias_hh"), g("weight_hr")

    def _state_shapes(self, N):
        """The expected shapes of h_0 (and c_0): (layers * directions, N, proj_size or hidden_size), c_0's with
        hidden_size."""
        L = self.num_layers * (2 if self.bidirectional else 1)
        h = (L, N, self.proj_size or self.hidden_size)
        return (h, (L, N, self.hidden_size)) if self.mode == "LSTM" else (h,)

    def _initial_state(self, hx, N, x, batched=True):
        """hx checked against the expected shapes, or zeros of them when None (a tuple (h, c) for LSTM)."""
        lstm, shapes = self.mode == "LSTM", self._state_shapes(N)
        if hx is None:
            zeros = tuple(C.zeros(s, dtype=x.dtype, device=x.device) for s in shapes)
            return zeros if lstm else zeros[0]
        parts = hx if lstm else (hx,)
        if not batched:
            parts = tuple(p.unsqueeze(1) for p in parts)
        for i, (p, want) in enumerate(zip(parts, shapes)):
            if tuple(p.shape) != want:
                which = f"hidden[{i}]" if lstm else "hidden"
                raise RuntimeError(f"Expected {which} size {want}, got {list(p.shape)}")
        return parts if lstm else parts[0]

    def forward(self, input, hx=None):
        from ..utils.rnn import PackedSequence
        if isinstance(input, PackedSequence):
            return self._forward_packed(input, hx)
        lstm = self.mode == "LSTM"
        batched = input.dim() == 3
        if input.dim() not in (2, 3):
            raise ValueError(f"{type(self).__name__}: Expected input to be 2D or 3D, got {input.dim()}D instead")
        if input.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected {self.input_size}, "
                               f"got {input.shape[-1]}")
        x = input if batched else input.unsqueeze(1)
        if self.batch_first and batched:
            x = x.transpose(0, 1)
        hx = self._initial_state(hx, x.shape[1], x, batched)
        out, hn, cn = self._layers(x, hx)
        if self.batch_first and batched:
            out = out.transpose(0, 1)
        if not batched:
            out, hn = out.squeeze(1), hn.squeeze(1)
            cn = cn.squeeze(1) if lstm else None
        return (out, (hn, cn)) if lstm else (out, hn)

    def _forward_packed(self, input, hx):
        """The padded batch (sorted) through the masked layers; the output packed again, h_n in the input's order."""
        from ..utils.rnn import PackedSequence, pad_packed_sequence, _pack
        lstm = self.mode == "LSTM"
        data, batch_sizes, sorted_indices, unsorted_indices = input
        if data.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected {self.input_size}, "
                               f"got {data.shape[-1]}")
        x, lengths = pad_packed_sequence(PackedSequence(data, batch_sizes), total_length=None)
        T, N = x.shape[0], x.shape[1]
        given = hx is not None
        hx = self._initial_state(hx, N, x)
        if given and sorted_indices is not None:          # the states in the sequences' sorted order
            hx = tuple(p.index_select(1, sorted_indices) for p in hx) if lstm else hx.index_select(1, sorted_indices)
        steps = C.tensor(np.arange(T)[:, None, None] < lengths.numpy()[None, :, None])       # (T, N, 1)
        out, hn, cn = self._layers(x, hx, steps)
        out = PackedSequence(_pack(out, lengths), batch_sizes, sorted_indices, unsorted_indices)
        if unsorted_indices is not None:
            hn = hn.index_select(1, unsorted_indices)
            cn = cn.index_select(1, unsorted_indices) if lstm else None
        return (out, (hn, cn)) if lstm else (out, hn)

    def _layers(self, x, hx, steps=None):
        """x (T, N, input_size) through every layer and direction: (output, h_n, c_n or None). steps (T, N, 1), if
        given, says which steps each sequence has."""
        lstm = self.mode == "LSTM"
        D = 2 if self.bidirectional else 1
        h_n, c_n = [], []
        for layer in range(self.num_layers):
            outs = []
            for d, suffix in enumerate(("", "_reverse")[:D]):
                w_ih, w_hh, b_ih, b_hh, w_hr = self._weights(layer, suffix)
                k = layer * D + d
                state = (hx[0][k], hx[1][k]) if lstm else hx[k]
                if self.mode != "GRU" and b_hh is not None:
                    # both biases enter the gates as a sum: added once to the whole sequence's projection, not
                    # per step, so their gradient is one sum after the loop, not a sum and an add per step
                    b_ih, b_hh = b_ih + b_hh, None
                gx = F.linear(x, w_ih, b_ih)            # every time step's input projection at once
                step = _step(self.mode, self.hidden_size, w_hh, b_hh, w_hr)
                if steps is None:
                    state, ys = scan(step, state, gx, reverse=d == 1)
                else:
                    state, ys = scan(_masked(step), state, (gx, steps), reverse=d == 1)
                outs.append(ys)
                if lstm:
                    h_n.append(state[0])
                    c_n.append(state[1])
                else:
                    h_n.append(state)
            x = outs[0] if D == 1 else cat(outs, -1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, True)
        return x, stack(h_n, 0), stack(c_n, 0) if lstm else None

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if not self.bias:
            s += ", bias=False"
        if self.batch_first:
            s += ", batch_first=True"
        if self.dropout:
            s += f", dropout={self.dropout}"
        if self.bidirectional:
            s += ", bidirectional=True"
        return s


class RNN(RNNBase):
    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size, hidden_size, num_layers,
                         bias, batch_first, dropout, bidirectional, 0, device, dtype)
        self.nonlinearity = nonlinearity


class LSTM(RNNBase):
    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         proj_size, device, dtype)


class GRU(RNNBase):
    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, device=None, dtype=None):
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, 0,
                         device, dtype)


class RNNCellBase(Module):
    """One step of an RNN, LSTM or GRU (RNNCell, LSTMCell, GRUCell): PyTorch's weight_ih, weight_hh, bias_ih,
    bias_hh and their initialization; the step is RNNBase's."""

    def __init__(self, mode, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__()
        self.mode, self.input_size, self.hidden_size, self.bias = mode, input_size, hidden_size, bias
        gates = _GATES[mode] * hidden_size
        f = dict(dtype=dtype, device=device)
        self.weight_ih = Parameter(C.empty((gates, input_size), **f))
        self.weight_hh = Parameter(C.empty((gates, hidden_size), **f))
        if bias:
            self.bias_ih = Parameter(C.empty(gates, **f))
            self.bias_hh = Parameter(C.empty(gates, **f))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    reset_parameters = RNNBase.reset_parameters      # (uniform in +-1/sqrt(hidden_size))

    def forward(self, input, hx=None):
        if input.dim() not in (1, 2):
            raise ValueError(f"{type(self).__name__}: Expected input to be 1D or 2D, got {input.dim()}D instead")
        batched = input.dim() == 2
        x = input if batched else input.unsqueeze(0)
        lstm = self.mode == "LSTM"
        if hx is None:
            z = C.zeros((x.shape[0], self.hidden_size), dtype=x.dtype)
            hx = (z, z) if lstm else z
        elif not batched:
            hx = tuple(h.unsqueeze(0) for h in hx) if lstm else hx.unsqueeze(0)
        step = _step(self.mode, self.hidden_size, self.weight_hh, self.bias_hh)
        state, _ = step(hx, F.linear(x, self.weight_ih, self.bias_ih))
        if not batched:
            state = tuple(s.squeeze(0) for s in state) if lstm else state.squeeze(0)
        return state


class RNNCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity: {nonlinearity}")
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size, hidden_size, bias,
                         device, dtype)
        self.nonlinearity = nonlinearity


class LSTMCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, bias, device, dtype)


class GRUCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__("GRU", input_size, hidden_size, bias, device, dtype)
