"""The reader: all-MiniLM-L6-v2's BERT encoder with a pooler and two heads, as a cross-encoder.

- `answerable`: does this sentence (with a sentence of context) answer the question?
- `supported`: does this evidence support this claim?
- `span`: a start and an end logit per token (SQuAD 2.0 style): where in the sentence the answer is, `[CLS]` when
  it is not there. The answerability the answer tier uses blends the `answerable` logit with the span margin
  (best span of the sentence against `[CLS]`), see `span_margin`.

Parameter names are the BERT checkpoint's (so the MiniLM weights load unchanged) plus `reader.*` for the new
pooler and heads; `safetensors_to_onnx.py` writes them, by the same names, into the graph that
`crates/attest-grounding/src/reader` runs with ONNX Runtime. The input layout (which
tokens go where, the length limits) is defined once here and once in `crates/attest-models/src/reader/input.rs`; both must agree.
`load_base` reads a base model's BERT tensors: a checkpoint's model.safetensors, or the int8 file that
onnx_to_bert.py writes (issue 41's backbone comparison), dequantised to f32.
"""

import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.torch import load_file

CLS, SEP, PAD = 101, 102, 0
MAX_LEN = 128
MAX_FIRST = 48


MAX_SPAN = 30


def load_base(directory):
    """The base model's tensors by BERT checkpoint name, in f32: `model.safetensors` as it is, else
    `model.int8.safetensors` (onnx_to_bert.py): NAME.q (int8/uint8, torch layout) with NAME.scale and
    NAME.zero_point (scalars, or one per output row) become (q - zero_point) * scale; other tensors are f32."""
    if os.path.exists(f"{directory}/model.safetensors"):
        return load_file(f"{directory}/model.safetensors")
    packed = load_file(f"{directory}/model.int8.safetensors")
    out = {}
    for name, t in packed.items():
        if name.endswith(".q"):
            p = name[:-2]
            scale, zero = packed[f"{p}.scale"].float(), packed[f"{p}.zero_point"].float()
            if scale.dim():
                scale, zero = scale[:, None], zero[:, None]
            out[p] = (t.float() - zero) * scale
        elif not name.endswith((".scale", ".zero_point")):
            out[name] = t.float()
    return out


def pair_ids(tok, first, second, context=None):
    """[CLS] first [SEP] second [SEP] (context [SEP]); type 0 for the first part, 1 after.

    `first` is cut to MAX_FIRST tokens, `second` to what is left of MAX_LEN, `context` gets the rest (and is
    left out when no room is left)."""
    a = tok.encode(first, add_special_tokens=False).ids[:MAX_FIRST]
    b = tok.encode(second, add_special_tokens=False).ids
    c = tok.encode(context, add_special_tokens=False).ids if context else []
    room = MAX_LEN - 3 - len(a)
    b = b[:room]
    room -= len(b)
    c = c[: max(0, room - 1)]
    ids = [CLS] + a + [SEP] + b + [SEP]
    if c:
        ids += c + [SEP]
    types = [0] * (len(a) + 2) + [1] * (len(ids) - len(a) - 2)
    return ids, types


def sentence_range(ids):
    """[lo, hi): the positions of the second part (the sentence), between the first and second [SEP]."""
    first = ids.index(SEP)
    return first + 1, ids.index(SEP, first + 1)


def answer_span(tok, first, second, answers):
    """(start, end) token positions (inclusive, in the pair) of the first gold answer found verbatim in `second`,
    or None when none is (or it was cut off)."""
    a = len(tok.encode(first, add_special_tokens=False).ids[:MAX_FIRST])
    enc = tok.encode(second, add_special_tokens=False)
    room = MAX_LEN - 3 - a
    for ans in answers:
        ans = ans.strip()
        at = second.find(ans) if ans else -1
        if at < 0:
            continue
        lo, hi = at, at + len(ans)
        toks = [k for k, (s, e) in enumerate(enc.offsets) if s < hi and e > lo]
        if toks and toks[-1] < room and toks[-1] - toks[0] < MAX_SPAN:
            return a + 2 + toks[0], a + 2 + toks[-1]
    return None


def span_margin(span_logits, lo, hi):
    """Best start+end over spans of at most MAX_SPAN tokens inside [lo, hi), minus [CLS]'s start+end."""
    start, end = span_logits[:, 0], span_logits[:, 1]
    null = start[0] + end[0]
    if hi <= lo:
        return -null
    s, e = start[lo:hi], end[lo:hi]
    n = hi - lo
    pair = s[:, None] + e[None, :]
    i = torch.arange(n)
    valid = (i[None, :] >= i[:, None]) & (i[None, :] - i[:, None] < MAX_SPAN)
    return pair.masked_fill(~valid, float("-inf")).max() - null


class SelfAttention(nn.Module):
    def __init__(self, h):
        super().__init__()
        self.query, self.key, self.value = nn.Linear(h, h), nn.Linear(h, h), nn.Linear(h, h)


class Output(nn.Module):
    def __init__(self, i, h):
        super().__init__()
        self.dense = nn.Linear(i, h)
        self.LayerNorm = nn.LayerNorm(h, eps=1e-12)


class Attention(nn.Module):
    def __init__(self, h):
        super().__init__()
        setattr(self, "self", SelfAttention(h))
        self.output = Output(h, h)


class Intermediate(nn.Module):
    def __init__(self, h, i):
        super().__init__()
        self.dense = nn.Linear(h, i)


class Layer(nn.Module):
    def __init__(self, h, i, heads):
        super().__init__()
        self.heads = heads
        self.attention = Attention(h)
        self.intermediate = Intermediate(h, i)
        self.output = Output(i, h)

    def forward(self, x, mask_bias):
        b, t, h = x.shape
        sa = getattr(self.attention, "self")
        d = h // self.heads

        def split(y):
            return y.view(b, t, self.heads, d).transpose(1, 2)

        q, k, v = split(sa.query(x)), split(sa.key(x)), split(sa.value(x))
        scores = q @ k.transpose(-1, -2) / math.sqrt(d) + mask_bias
        ctx = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, t, h)
        a = self.attention.output
        x = a.LayerNorm(x + a.dense(ctx))
        inter = F.gelu(self.intermediate.dense(x))
        o = self.output
        return o.LayerNorm(x + o.dense(inter))


class Embeddings(nn.Module):
    def __init__(self, vocab, h, positions, types):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, h)
        self.position_embeddings = nn.Embedding(positions, h)
        self.token_type_embeddings = nn.Embedding(types, h)
        self.LayerNorm = nn.LayerNorm(h, eps=1e-12)


class Encoder(nn.Module):
    def __init__(self, layers, h, i, heads):
        super().__init__()
        self.layer = nn.ModuleList([Layer(h, i, heads) for _ in range(layers)])


class Heads(nn.Module):
    def __init__(self, h):
        super().__init__()
        self.pooler = nn.Linear(h, h)
        self.answerable = nn.Linear(h, 1)
        self.supported = nn.Linear(h, 1)
        self.span = nn.Linear(h, 2)


class Reader(nn.Module):
    def __init__(self, config):
        super().__init__()
        h, i = config["hidden_size"], config["intermediate_size"]
        self.embeddings = Embeddings(config["vocab_size"], h, config["max_position_embeddings"], config["type_vocab_size"])
        self.encoder = Encoder(config["num_hidden_layers"], h, i, config["num_attention_heads"])
        self.reader = Heads(h)
        self.dropout = nn.Dropout(0.1)
        # Rounds without span loss leave the span head's dropout out (it would shift their random stream).
        self.train_span = False

    def encode(self, ids, types, mask):
        """The encoder's last hidden states (BertModel's last_hidden_state)."""
        t = ids.shape[1]
        e = self.embeddings
        pos = torch.arange(t, device=ids.device).unsqueeze(0)
        x = e.LayerNorm(e.word_embeddings(ids) + e.position_embeddings(pos) + e.token_type_embeddings(types))
        bias = (1.0 - mask[:, None, None, :].float()) * -10000.0
        for layer in self.encoder.layer:
            x = layer(x, bias)
        return x

    def forward(self, ids, types, mask):
        """Two logits per row, (answerable, supported), and two per token, (span start, span end)."""
        x = self.encode(ids, types, mask)
        pooled = torch.tanh(self.reader.pooler(self.dropout(x[:, 0])))
        pooled = self.dropout(pooled)
        heads = torch.cat([self.reader.answerable(pooled), self.reader.supported(pooled)], dim=-1)
        return heads, self.reader.span(self.dropout(x) if self.train_span else x)


def collate(rows):
    """Pads a list of (ids, types) to the longest row."""
    t = max(len(ids) for ids, _ in rows)
    ids = torch.zeros(len(rows), t, dtype=torch.long)
    types = torch.zeros(len(rows), t, dtype=torch.long)
    mask = torch.zeros(len(rows), t, dtype=torch.long)
    for r, (i, ty) in enumerate(rows):
        ids[r, : len(i)] = torch.tensor(i)
        types[r, : len(ty)] = torch.tensor(ty)
        mask[r, : len(i)] = 1
    return ids, types, mask
