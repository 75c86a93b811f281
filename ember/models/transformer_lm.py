"""A GPT-style decoder-only language model (nanoGPT's layout and names) for character-level text."""

from __future__ import annotations

import math

from ember import creation, dtypes, nn, ops
from ember import random as ember_random
from ember.autograd import grad_mode
from ember.nn import functional as F
from ember.tensor import Tensor


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention where position t attends to positions <= t."""

    def __init__(self, n_embd: int, n_head: int, dropout: float = 0.0, bias: bool = True) -> None:
        super().__init__()
        if n_embd % n_head != 0:
            raise ValueError(f"n_embd ({n_embd}) must be divisible by n_head ({n_head})")
        self.n_head = n_head
        self.n_embd = n_embd
        self.dropout = dropout
        self.c_attn = nn.Linear(n_embd, 3 * n_embd, bias=bias)  # query, key and value in one matmul
        self.c_proj = nn.Linear(n_embd, n_embd, bias=bias)
        self.resid_dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        b, t, c = x.shape
        hs = c // self.n_head
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        q = q.reshape(b, t, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)
        k = k.reshape(b, t, self.n_head, hs).transpose(1, 2)
        v = v.reshape(b, t, self.n_head, hs).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout if self.training else 0.0,
                                           is_causal=True)
        y = y.transpose(1, 2).reshape(b, t, c)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    """Position-wise feed-forward: n_embd -> 4 n_embd -> GELU -> n_embd."""

    def __init__(self, n_embd: int, dropout: float = 0.0, bias: bool = True) -> None:
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd, bias=bias)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * n_embd, n_embd, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    """Pre-norm transformer block: x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, n_embd: int, n_head: int, dropout: float = 0.0, bias: bool = True) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd, bias=bias)
        self.attn = CausalSelfAttention(n_embd, n_head, dropout, bias)
        self.ln_2 = nn.LayerNorm(n_embd, bias=bias)
        self.mlp = MLP(n_embd, dropout, bias)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class TransformerLM(nn.Module):
    """Token + learned position embeddings, n_layer blocks, final LayerNorm, linear head to the vocabulary."""

    input_dtypes = (dtypes.int64,)  # token ids; em.summary builds its example input with this dtype

    def __init__(self, vocab_size: int, block_size: int = 64, n_layer: int = 2, n_head: int = 4, n_embd: int = 128,
                 dropout: float = 0.0, tie_weights: bool = True, bias: bool = True) -> None:
        super().__init__()
        self.vocab_size = vocab_size
        self.block_size = block_size
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab_size, n_embd),
            wpe=nn.Embedding(block_size, n_embd),
            drop=nn.Dropout(dropout),
            h=nn.ModuleList([Block(n_embd, n_head, dropout, bias) for _ in range(n_layer)]),
            ln_f=nn.LayerNorm(n_embd, bias=bias),
        ))
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        if tie_weights:
            # One matrix both embeds tokens and scores them (Press & Wolf 2017): fewer parameters.
            self.lm_head.weight = self.transformer.wte.weight
        self.apply(self._init_weights)
        # GPT-2: scale the residual projections by 1/sqrt(2 n_layer) so the residual stream's variance
        # does not grow with depth.
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * n_layer))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, 0.0, 0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, 0.0, 0.02)

    def forward(self, idx: Tensor) -> Tensor:
        """Logits (B, T, vocab_size) for token ids idx (B, T), T <= block_size."""
        t = idx.shape[-1]
        if t > self.block_size:
            raise ValueError(f"transformer_lm: sequence length {t} exceeds block_size {self.block_size}")
        pos = creation.arange(t, dtype=dtypes.int64, device=idx.device)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
        for block in self.transformer.h:
            x = block(x)
        return self.lm_head(self.transformer.ln_f(x))

    @grad_mode.no_grad()
    def generate(self, idx: Tensor, max_new_tokens: int, temperature: float = 1.0, top_k: int | None = None,
                 generator: ember_random.Generator | None = None) -> Tensor:
        """Extend idx (B, T) by max_new_tokens sampled tokens; temperature 0 means greedy decoding.

        Only the last block_size tokens condition each step. Call model.eval() first when it has dropout.
        """
        for _ in range(max_new_tokens):
            context = idx if idx.shape[1] <= self.block_size else idx[:, -self.block_size:]
            logits = self(context)[:, -1, :]
            if temperature == 0:
                nxt = ops.argmax(logits, dim=-1, keepdim=True)
            else:
                logits = logits / temperature
                if top_k is not None:
                    kth = ops.topk(logits, min(top_k, logits.shape[-1]), dim=-1)[0][:, -1:]
                    logits = logits.masked_fill(logits < kth, float("-inf"))
                probs = F.softmax(logits, dim=-1)
                nxt = creation.multinomial(probs, 1, generator=generator)
            idx = ops.cat([idx, nxt.to(idx.dtype)], dim=1)
        return idx


def transformer_lm(vocab_size: int, block_size: int = 64, n_layer: int = 2, n_head: int = 4, n_embd: int = 128,
                   dropout: float = 0.0, tie_weights: bool = True) -> TransformerLM:
    """A small GPT (decoder-only, causal self-attention) over a vocabulary of vocab_size tokens."""
    return TransformerLM(vocab_size, block_size, n_layer, n_head, n_embd, dropout, tie_weights)
