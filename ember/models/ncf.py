"""Neural collaborative filtering (He et al. 2017, NeuMF): a GMF tower and an MLP tower over user/item embeddings."""

from __future__ import annotations

from collections.abc import Sequence

from ember import dtypes, nn, ops
from ember.tensor import Tensor


class NCF(nn.Module):
    """NeuMF: GMF (elementwise product of embeddings) and an MLP on concatenated embeddings, fused by a Linear.

    forward(user_ids, item_ids) returns one logit per pair, shape (B,); train with BCEWithLogitsLoss
    on implicit feedback. The MLP tower's user and item embeddings are hidden[0] // 2 wide each.
    """

    input_dtypes = (dtypes.int64, dtypes.int64)  # user and item ids; em.summary builds its example inputs with these

    def __init__(self, num_users: int, num_items: int, embed_dim: int = 32, hidden: Sequence[int] = (64, 32, 16),
                 dropout: float = 0.0) -> None:
        super().__init__()
        hidden = tuple(hidden)
        if len(hidden) < 1 or hidden[0] % 2:
            raise ValueError(f"ncf: hidden must start with an even width (split between user and item), got {hidden}")
        self.gmf_user = nn.Embedding(num_users, embed_dim)
        self.gmf_item = nn.Embedding(num_items, embed_dim)
        self.mlp_user = nn.Embedding(num_users, hidden[0] // 2)
        self.mlp_item = nn.Embedding(num_items, hidden[0] // 2)
        layers: list[nn.Module] = []
        for a, b in zip(hidden[:-1], hidden[1:]):
            if dropout > 0:
                layers.append(nn.Dropout(dropout))
            layers += [nn.Linear(a, b), nn.ReLU()]
        self.mlp = nn.Sequential(*layers)
        self.predict = nn.Linear(embed_dim + hidden[-1], 1)
        # The initialisation of the reference NeuMF implementation.
        for emb in (self.gmf_user, self.gmf_item, self.mlp_user, self.mlp_item):
            nn.init.normal_(emb.weight, std=0.01)
        for m in self.mlp.modules():
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                nn.init.zeros_(m.bias)
        nn.init.kaiming_uniform_(self.predict.weight, a=1, nonlinearity="sigmoid")
        nn.init.zeros_(self.predict.bias)

    def forward(self, user_ids: Tensor, item_ids: Tensor) -> Tensor:
        """Logits (B,) for each (user, item) pair."""
        gmf = self.gmf_user(user_ids) * self.gmf_item(item_ids)
        mlp = self.mlp(ops.cat([self.mlp_user(user_ids), self.mlp_item(item_ids)], dim=-1))
        return self.predict(ops.cat([gmf, mlp], dim=-1)).squeeze(-1)


def ncf(num_users: int, num_items: int, embed_dim: int = 32, hidden: Sequence[int] = (64, 32, 16),
        dropout: float = 0.0) -> NCF:
    """NeuMF recommender over num_users x num_items; forward(user_ids, item_ids) -> logits."""
    return NCF(num_users, num_items, embed_dim, hidden, dropout)
