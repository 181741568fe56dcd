"""PyTorch twins of Gossamer's built-in models (docs/library/python.md, "The GPT's PyTorch twin").

Gpt is the built-in "gpt" model (core/include/gossamer/core/models.hpp, models::gpt()) as a
torch.nn.Module whose parameters, in registration order, are the built-in flat layout:

    wte [vocab, width], wpe [context, width]                                 layer "embed"
    blocks.i: ln1.weight, ln1.bias, attn.qkv.weight [3 width, width], attn.qkv.bias,
              attn.proj.weight [width, width], attn.proj.bias, ln2.weight, ln2.bias,
              mlp.fc.weight [4 width, width], mlp.fc.bias, mlp.proj.weight [width, 4 width],
              mlp.proj.bias                                                  layer "block<i+1>"
    lnf.weight, lnf.bias, out.weight [vocab, width], out.bias [vocab]        layer "head"

so torch.nn.utils.parameters_to_vector(model.parameters()) is Gossamer's parameter vector and
gossamer.torch.flatten(model, model.partitions()) gives the built-in layer names as partitions.
Attention is written out (torch 1.13 has no scaled_dot_product_attention): causal, scaled by
1/sqrt(d), heads of d = width / heads over rows h d .. (h + 1) d of q, k and v; LayerNorm eps
1e-5; exact GELU; no dropout. A sample is a window of context + 1 token ids: positions
0..context-1 are the input, 1..context the targets, and the loss is the cross-entropy per
character averaged over positions and samples (nats per character).

Also here: the config's local optimizer as a torch optimizer (optimizer(), clip_gradients()),
shared by examples/python/gpt_torch.py and the torch reference rows (bench/torch_job.py).
"""

import math

import torch
import torch.nn.functional as F
from torch import nn

from . import ConfigError

LN2 = math.log(2.0)


class CausalSelfAttention(nn.Module):
    def __init__(self, width, heads, context):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        # The future of each position, made once (a buffer: not a parameter, not saved).
        self.register_buffer("future", torch.ones(context, context, dtype=torch.bool).triu(1),
                             persistent=False)

    def forward(self, x):
        b, t, w = x.shape
        h, d = self.heads, w // self.heads
        q, k, v = self.qkv(x).split(w, dim=2)  # rows of qkv: q, then k, then v
        q, k, v = (z.view(b, t, h, d).transpose(1, 2) for z in (q, k, v))  # [b, h, t, d]
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d))
        scores = scores.masked_fill(self.future[:t, :t], float("-inf"))
        y = torch.softmax(scores, dim=-1) @ v  # [b, h, t, d]
        return self.proj(y.transpose(1, 2).reshape(b, t, w))


class Mlp(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.fc = nn.Linear(width, 4 * width)
        self.gelu = nn.GELU()  # the exact erf form, as the built-in's
        self.proj = nn.Linear(4 * width, width)

    def forward(self, x):
        return self.proj(self.gelu(self.fc(x)))


class Block(nn.Module):
    def __init__(self, width, heads, context):
        super().__init__()
        self.ln1 = nn.LayerNorm(width, eps=1e-5)
        self.attn = CausalSelfAttention(width, heads, context)
        self.ln2 = nn.LayerNorm(width, eps=1e-5)
        self.mlp = Mlp(width)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class Gpt(nn.Module):
    """The built-in GPT (models::GptSpec's sizes); parameters in the built-in layout."""

    def __init__(self, vocab, context=64, layers=2, heads=4, width=128):
        super().__init__()
        for name, v, least in (("vocab", vocab, 2), ("context", context, 1),
                               ("layers", layers, 1), ("heads", heads, 1), ("width", width, 1)):
            if int(v) < least:
                raise ConfigError(f"model.{name}: {v}; give at least {least}")
        if width % heads:
            raise ConfigError(f"model.heads: {heads} heads do not divide the width {width}; "
                              "give a width that is a multiple of heads")
        self.vocab, self.context, self.layers = int(vocab), int(context), int(layers)
        self.heads, self.width = int(heads), int(width)
        self.wte = nn.Embedding(vocab, width)
        self.wpe = nn.Embedding(context, width)
        self.blocks = nn.ModuleList(Block(width, heads, context) for _ in range(layers))
        self.lnf = nn.LayerNorm(width, eps=1e-5)
        self.out = nn.Linear(width, vocab)

    def partitions(self):
        """The built-in layers as gossamer.torch.flatten partitions: "embed", "block1".. "blockL",
        "head" (each a contiguous range, in the built-in order)."""
        parts = {"embed": ["wte", "wpe"]}
        parts.update({f"block{i + 1}": [f"blocks.{i}"] for i in range(self.layers)})
        parts["head"] = ["lnf", "out"]
        return parts

    def init_(self, seed):
        """GPT-2's init, as the built-in's init() draws it in distribution (not bit for bit: the
        generators differ; take gossamer.shard's "params" for the built-in's very first point)."""
        g = torch.Generator().manual_seed(int(seed))
        small = 0.02 / math.sqrt(2 * self.layers)
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name.endswith("bias"):
                    p.zero_()
                elif ".ln" in name or name.startswith("lnf"):
                    p.fill_(1.0)
                else:
                    std = small if name.endswith("proj.weight") else 0.02
                    p.copy_(torch.randn(p.shape, generator=g) * std)
        return self

    def forward(self, idx):
        """Logits [batch, t, vocab] after every prefix of idx [batch, t] (t <= context)."""
        t = idx.shape[1]
        if t > self.context:
            raise ConfigError(f"tokens: {t} positions, the model's context is {self.context}; "
                              "give at most context tokens")
        x = self.wte(idx) + self.wpe(torch.arange(t, device=idx.device))
        for block in self.blocks:
            x = block(x)
        return self.out(self.lnf(x))

    def loss(self, windows):
        """Mean cross-entropy per character (nats) of windows [batch, context + 1] of ids."""
        windows = windows.long()
        logits = self(windows[:, :-1])
        return F.cross_entropy(logits.reshape(-1, self.vocab), windows[:, 1:].reshape(-1))

    @torch.no_grad()
    def evaluate(self, windows, batch=256):
        """(mean loss in nats per character, fraction of windows whose last position predicts
        the last token): what the built-in's evaluate() reports as loss and accuracy."""
        total, correct, n = 0.0, 0, len(windows)
        for i in range(0, n, batch):
            w = windows[i:i + batch].long()
            logits = self(w[:, :-1])
            total += float(F.cross_entropy(logits.reshape(-1, self.vocab), w[:, 1:].reshape(-1),
                                           reduction="sum")) / (w.shape[1] - 1)
            correct += int((logits[:, -1].argmax(-1) == w[:, -1]).sum())
        return total / max(n, 1), correct / max(n, 1)

    @torch.no_grad()
    def generate(self, ids, count, temperature=0.0, generator=None):
        """`count` more ids after ids (a list): greedy at temperature 0, else sampled from
        softmax(logits / temperature); the last `context` ids are the model's input."""
        ids = list(ids)
        for _ in range(int(count)):
            logits = self(torch.tensor([ids[-self.context:]]))[0, -1]
            if temperature <= 0:
                ids.append(int(logits.argmax()))
            else:
                p = torch.softmax(logits / temperature, dim=-1)
                ids.append(int(torch.multinomial(p, 1, generator=generator)))
        return ids


def gpt_from_config(config, vocab, context=None):
    """The Gpt of a training config's "model" section ({"name": "gpt", "layers", "heads",
    "width", "context"}; models::GptSpec's defaults) for `vocab` characters. context: the
    windows' (their length - 1) when the config does not say it."""
    model = config.get("model", {}) if isinstance(config, dict) else {}
    if model.get("name") != "gpt":
        raise ConfigError(f"model.name: \"{model.get('name')}\" is not \"gpt\"; the twin is "
                          "the built-in gpt's")
    ctx = model.get("context", context if context is not None else 64)
    return Gpt(vocab, context=ctx, layers=model.get("layers", 2), heads=model.get("heads", 4),
               width=model.get("width", 128))


def from_shard(config, shard):
    """The twin of the config's GPT at the built-in first point (gossamer.shard's "params"):
    its parameters in the built-in order, checked against the shard's layer layout."""
    vocab = len(shard.get("vocabulary") or "") or int(shard["classes"])
    net = gpt_from_config(config, vocab, context=shard["x"].shape[1] - 1)
    flat = torch.nn.utils.parameters_to_vector(net.parameters())
    if flat.numel() != shard["params"].size:
        raise ConfigError(f"model: the twin has {flat.numel()} parameters, the built-in "
                          f"{shard['params'].size}; the config's sizes and the data disagree")
    with torch.no_grad():
        torch.nn.utils.vector_to_parameters(torch.from_numpy(shard["params"]).clone(),
                                            net.parameters())
    return net


def optimizer(config, params):
    """The config's "optimizer" (sgd, adam or adamw: Gossamer's rules are torch's) as a torch
    optimizer over params."""
    o = config.get("optimizer", {})
    name, lr = o.get("name"), float(o.get("lr", 0.1))
    wd = float(o.get("weight_decay", 0))
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=float(o.get("momentum", 0)),
                               nesterov=bool(o.get("nesterov", False)), weight_decay=wd)
    if name in ("adam", "adamw"):
        kind = torch.optim.Adam if name == "adam" else torch.optim.AdamW
        return kind(params, lr=lr, betas=(float(o.get("beta1", 0.9)), float(o.get("beta2", 0.999))),
                    eps=float(o.get("eps", 1e-8)), weight_decay=wd)
    raise ConfigError(f"optimizer.name: \"{name}\" has no torch twin; use sgd, adam or adamw")


def clip_gradients(config, params):
    """Global-norm clipping of params' gradients to the config's optimizer.clip_norm (none when
    absent or 0); returns the norm before clipping (None without clipping)."""
    limit = float(config.get("optimizer", {}).get("clip_norm", 0) or 0)
    if limit <= 0:
        return None
    return float(torch.nn.utils.clip_grad_norm_(params, limit))
