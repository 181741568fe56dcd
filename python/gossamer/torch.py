"""PyTorch integration: a model's parameters as views into one flat buffer that a gossamer.Peer
mixes in place, and an optimizer wrapper that gossips after each step (docs/library/python.md)."""

import fnmatch

import torch

from . import ConfigError


class FlatParameters:
    """The flat float32 buffer a model's parameters view, and its partition layout.

    buffer: the torch tensor (float32, on the parameters' device: CPU or one CUDA device) to hand
        to gossamer.Peer; every parameter's .data is
        a view into it, so the point Gossamer writes into the buffer is the model's, with no copy.
    layout: [(partition, offset, size)] for gossamer.Peer(layout=...); [] for one partition.
    slices: {parameter name: (offset, size)}.
    """

    def __init__(self, buffer, layout, slices, params):
        self.buffer = buffer
        self.layout = layout
        self.slices = slices
        self._params = params  # [(name, parameter)]

    def check(self):
        """Raises gossamer.Error unless every parameter still views the buffer at its offset
        (assigning p.data = ... elsewhere would make gossip silently miss that parameter)."""
        base = self.buffer.data_ptr()
        size = self.buffer.element_size()
        for name, p in self._params:
            offset, _ = self.slices[name]
            if p.data_ptr() != base + offset * size or not p.is_contiguous():
                raise ConfigError(f"parameter {name}: it no longer views gossamer's flat buffer "
                                  "(its .data was replaced); update it in place (p.data.copy_)")


def _group_of(name, groups):
    for group, patterns in groups.items():
        for pat in patterns:
            if pat != "*" and (name == pat or name.startswith(pat + ".") or
                               fnmatch.fnmatchcase(name, pat)):
                return group
    for group, patterns in groups.items():
        if "*" in patterns:
            return group
    return None


def flatten(module, partitions=None):
    """Moves module's parameters into one flat float32 buffer on their device (the CPU or one
    CUDA device) and makes each a view into it.

    partitions: {partition: [module or parameter names, glob patterns, "*" for the rest]}, e.g.
    {"fast": ["classifier"], "slow": ["*"]}; each partition becomes one contiguous range (the
    buffer is ordered partition by partition). Returns FlatParameters.
    """
    named = [(n, p) for n, p in module.named_parameters()]
    if not named:
        raise ConfigError("model: it has no parameters; give a torch.nn.Module with parameters")
    device = named[0][1].device
    for name, p in named:
        if p.dtype != torch.float32 or p.device.type not in ("cpu", "cuda"):
            raise ConfigError(f"parameter {name}: {p.dtype} on {p.device}; gossamer gossips "
                              "float32 parameters in CPU or CUDA memory (model.float())")
        if p.device != device:
            raise ConfigError(f"parameter {name}: on {p.device}, but {named[0][0]} is on "
                              f"{device}; put the whole model on one device (model.to(device))")
    order = named
    groups = dict(partitions or {})
    assignment = {}
    if groups:
        names = ", ".join(n for n, _ in named)
        for group, patterns in groups.items():
            if isinstance(patterns, str) or not list(patterns):
                raise ConfigError(f"partitions.{group}: give a list of module names "
                                  f"(or \"*\"); the model's parameters are {names}")
        for name, _ in named:
            g = _group_of(name, groups)
            if g is None:
                raise ConfigError(f"partitions: parameter {name} is in no partition; add it to "
                                  "one, or put \"*\" in one partition for the rest")
            assignment[name] = g
        for group in groups:
            if group not in assignment.values():
                raise ConfigError(f"partitions.{group}: its names match no parameter of the "
                                  f"model; the model's parameters are {names}")
        rank = {g: i for i, g in enumerate(groups)}
        order = sorted(named, key=lambda np_: rank[assignment[np_[0]]])  # stable
    total = sum(p.numel() for _, p in order)
    buffer = torch.empty(total, dtype=torch.float32, device=device)
    slices = {}
    layout = []
    offset = 0
    with torch.no_grad():
        for name, p in order:
            n = p.numel()
            view = buffer[offset:offset + n]
            view.copy_(p.detach().reshape(-1))
            p.data = view.view_as(p)
            slices[name] = (offset, n)
            if groups:
                g = assignment[name]
                if layout and layout[-1][0] == g:
                    layout[-1] = (g, layout[-1][1], layout[-1][2] + n)
                else:
                    layout.append((g, offset, n))
            offset += n
    return FlatParameters(buffer, layout, slices, order)


def _buffer_range(params):
    """(first byte address, byte count) of the buffer a gossamer.Peer was built from, or None
    when it cannot tell (a buffer-protocol object that is neither a tensor nor a NumPy array)."""
    if torch.is_tensor(params):
        return params.data_ptr(), params.numel() * params.element_size()
    interface = getattr(params, "__array_interface__", None)
    if interface is not None:
        return interface["data"][0], int(getattr(params, "nbytes", 0))
    return None


def _check_same_parameters(optimizer, peer, flat):
    """Raises ConfigError unless the optimizer steps the parameters the peer gossips: every one
    must view the peer's buffer (flat's, when given). Another model's parameters would train
    without ever being mixed, and the peer would gossip a model nobody updates."""
    groups = getattr(optimizer, "param_groups", None)
    if groups is None:
        raise ConfigError("optimizer: give a torch.optim optimizer (it has no param_groups)")
    where = _buffer_range(getattr(peer, "_params", None))
    if flat is not None and where is not None and \
            (flat.buffer.data_ptr(), flat.buffer.numel() * flat.buffer.element_size()) != where:
        raise ConfigError("flat: its buffer is not the one the gossamer.Peer was built from; "
                          "pass flat.buffer to gossamer.Peer (the same flatten() result)")
    if flat is not None:
        names = {id(p): name for name, p in flat._params}
        for g, group in enumerate(groups):
            for i, p in enumerate(group["params"]):
                if id(p) not in names:
                    raise ConfigError(
                        f"optimizer: param_groups[{g}].params[{i}] (shape {tuple(p.shape)}) is "
                        "not a parameter of the model given to gossamer.torch.flatten (another "
                        "model's?); build the optimizer from that model's parameters "
                        "(optimizer(model.parameters(), ...))")
        return
    if where is None:
        return
    first, nbytes = where
    for g, group in enumerate(groups):
        for i, p in enumerate(group["params"]):
            begin = p.data_ptr()
            end = begin + p.numel() * p.element_size()
            if not (first <= begin and end <= first + nbytes):
                raise ConfigError(
                    f"optimizer: param_groups[{g}].params[{i}] (shape {tuple(p.shape)}) does not "
                    "view the buffer the gossamer.Peer gossips (another model's parameters?); "
                    "flatten the model (gossamer.torch.flatten), give flat.buffer to "
                    "gossamer.Peer and build the optimizer from that model's parameters")


class GossipOptimizer:
    """Wraps any torch.optim optimizer: step() takes the optimizer's local step, then hands the
    update to the gossamer.Peer, which mixes and writes the next point into the parameters.

    Gradients, the optimizer's state and state_dict() are the wrapped optimizer's and survive
    every round (only the parameter values change). step() returns the loss, as torch's do;
    done is True after the peer's last step (the parameters then hold the final model).
    An LR scheduler is attached to the wrapped optimizer (opt.optimizer). evaluate: a function
    returning (accuracy, loss) of the model, called at the peer's evaluation points (its
    eval_interval) before the step is handed over.

    outer: the peer's local updates and outer optimizer (gossamer.Peer(..., outer={...}), the
    training config's "outer" keys): the wrapped optimizer is then the inner one, its state kept
    across rounds. The peer holds them; given here too, they must be the peer's (a check that
    the loop and the peer agree), else ConfigError.
    """

    def __init__(self, optimizer, peer, flat=None, evaluate=None, outer=None):
        _check_same_parameters(optimizer, peer, flat)
        _check_same_outer(outer, peer)
        self.optimizer = optimizer
        self.peer = peer
        self.flat = flat
        self.evaluate = evaluate  # () -> (accuracy, loss), at the peer's evaluation points
        self.done = False

    def step(self, loss=None, closure=None):
        if self.done:
            raise ConfigError("step: the peer took its last step; stop the loop when "
                              "GossipOptimizer.done is True")
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        self.optimizer.step()
        if self.flat is not None:
            self.flat.check()
        value = float(loss.detach()) if torch.is_tensor(loss) else float(loss or 0.0)
        if self.evaluate is not None and self.peer.evaluation_due():
            accuracy, test_loss = self.evaluate()
            self.peer.record_evaluation(accuracy, test_loss)
        self.done = not self.peer.step(value)
        return loss

    def zero_grad(self, set_to_none=True):
        self.optimizer.zero_grad(set_to_none=set_to_none)

    def state_dict(self):
        return self.optimizer.state_dict()

    def load_state_dict(self, state):
        self.optimizer.load_state_dict(state)

    @property
    def param_groups(self):
        return self.optimizer.param_groups

    @property
    def state(self):
        return self.optimizer.state

    def finish(self):
        """Ends this peer's part (remaining steps with a zero update); the final metrics."""
        self.done = True
        return self.peer.finish()


def _check_same_outer(outer, peer):
    """Raises ConfigError unless outer (the "outer" keys as a dict, or None) are the peer's
    (compared as read: defaults filled in, so {"steps": 4} is {"steps": 4, "lr": 1.0})."""
    if outer is None:
        return
    from . import _json_text, _native
    mine = _native.outer_describe(_json_text(outer, "outer"))  # bad keys: the peer's lines
    theirs = getattr(peer, "outer", None)
    if mine != theirs:
        raise ConfigError(f"outer: {mine}, but the gossamer.Peer was built with "
                          f"{theirs or 'no outer'}; pass outer= to gossamer.Peer (it runs the "
                          "rounds), the same dict to both")


def load_model(target, model_file):
    """Copies the parameters of a Gossamer model file into a PyTorch model; returns the
    gossamer.ModelFile.

    target: a FlatParameters (gossamer.torch.flatten's: its buffer receives the flat vector as
        it is) or a torch.nn.Module (its parameters in named_parameters() order receive
        consecutive slices). The built-in dense models (softmax, linear, mlp) store each layer as
        torch.nn.Linear does, weight [out, in] row-major then bias, so an nn.Sequential of Linear
        layers (with ReLUs between them for an mlp) of the same sizes takes their files as they
        are (docs/library/python.md).
    model_file: a path, or a ModelFile from gossamer.load_model.
    Raises ConfigError naming both counts when the file's parameter count differs from the
    target's, or when a parameter would straddle the end of the file's vector.
    """
    from .model_file import ModelFile, load_model as _load

    m = model_file if isinstance(model_file, ModelFile) else _load(model_file)
    values = torch.as_tensor(m.params if hasattr(m.params, "dtype") else list(m.params),
                             dtype=torch.float32)
    if isinstance(target, FlatParameters):
        if target.buffer.numel() != values.numel():
            raise ConfigError(f"the model file holds {values.numel()} parameters ({m.model}), but "
                              f"the flat buffer has {target.buffer.numel()}; load it into the "
                              "model it was trained as")
        with torch.no_grad():
            target.buffer.copy_(values.to(target.buffer.device))
        return m
    params = list(target.parameters())
    total = sum(p.numel() for p in params)
    if total != values.numel():
        raise ConfigError(f"the model file holds {values.numel()} parameters ({m.model}), but "
                          f"the torch model has {total}; load it into a model of the same "
                          "layers and sizes")
    offset = 0
    with torch.no_grad():
        for p in params:
            n = p.numel()
            p.copy_(values[offset:offset + n].view_as(p).to(p.device, p.dtype))
            offset += n
    return m
