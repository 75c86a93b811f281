"""A sequence classifier: token embedding, an LSTM, and a linear head on the final hidden state."""

from __future__ import annotations

from ember import dtypes, nn, ops
from ember.tensor import Tensor


class LSTMClassifier(nn.Module):
    """Embedding -> LSTM (batch_first) -> last layer's final hidden state(s) -> dropout -> Linear.

    With bidirectional=True the forward and backward final states are concatenated. The final state
    is taken after the whole sequence, so pad sequences on the left (or use equal lengths).
    """

    input_dtypes = (dtypes.int64,)  # token ids; em.summary builds its example input with this dtype

    def __init__(self, vocab_size: int, embed_dim: int = 64, hidden_size: int = 128, num_classes: int = 2,
                 num_layers: int = 1, bidirectional: bool = False, dropout: float = 0.0,
                 padding_idx: int | None = None) -> None:
        super().__init__()
        if not hasattr(nn, "LSTM"):
            raise NotImplementedError("lstm_classifier needs ember.nn.LSTM, which this build of Ember lacks")
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=padding_idx)
        # nn.LSTM applies dropout only between stacked layers, so it is off for a single layer.
        self.lstm = nn.LSTM(embed_dim, hidden_size, num_layers=num_layers, batch_first=True,
                            bidirectional=bidirectional, dropout=dropout if num_layers > 1 else 0.0)
        self.dropout = nn.Dropout(dropout)
        self.fc = nn.Linear(hidden_size * (2 if bidirectional else 1), num_classes)
        self.bidirectional = bidirectional

    def forward(self, tokens: Tensor) -> Tensor:
        """Logits (B, num_classes) for token ids (B, T)."""
        _, (h_n, _) = self.lstm(self.embedding(tokens))
        h = ops.cat([h_n[-2], h_n[-1]], dim=1) if self.bidirectional else h_n[-1]
        return self.fc(self.dropout(h))


def lstm_classifier(vocab_size: int, embed_dim: int = 64, hidden_size: int = 128, num_classes: int = 2,
                    num_layers: int = 1, bidirectional: bool = False, dropout: float = 0.0) -> LSTMClassifier:
    """An LSTM text classifier over a vocabulary of vocab_size tokens."""
    return LSTMClassifier(vocab_size, embed_dim, hidden_size, num_classes, num_layers, bidirectional, dropout)
