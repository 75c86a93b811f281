"""A PyTorch tutorial-style classifier: Dataset, DataLoader, nn.Module, CrossEntropyLoss, SGD with momentum,
a StepLR schedule, train/eval modes, state_dict save and load.

It runs unchanged on Ember; for PyTorch, only the import lines marked below differ
(tests/test_compat_corpus.py runs it both ways and compares the numbers). The last line printed is
a JSON summary.
"""

import io
import json

import numpy as np

import ember as torch  # PyTorch: import torch
import ember.nn as nn  # PyTorch: import torch.nn as nn
from ember.utils.data import DataLoader, TensorDataset  # PyTorch: from torch.utils.data import ...

rng = np.random.RandomState(0)
centers = rng.randn(3, 4) * 2.0
labels = rng.randint(0, 3, 240)
points = (centers[labels] + rng.randn(240, 4)).astype(np.float32)
dataset = TensorDataset(torch.tensor(points), torch.tensor(labels))
loader = DataLoader(dataset, batch_size=24, shuffle=False)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(4, 16)
        self.drop = nn.Dropout(0.0)
        self.out = nn.Linear(16, 3)

    def forward(self, x):
        return self.out(self.drop(torch.relu(self.hidden(x))))


model = Net()
with torch.no_grad():  # the same starting weights in every framework
    for name, p in model.named_parameters():
        p.copy_(torch.tensor(np.random.RandomState(len(name)).uniform(-0.3, 0.3, tuple(p.shape)).astype(np.float32)))

criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=3, gamma=0.5)
losses = []
for _epoch in range(6):
    model.train()
    total = 0.0
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        total += loss.item()
    scheduler.step()
    losses.append(total / len(loader))

model.eval()
with torch.no_grad():
    logits = model(torch.tensor(points))
    accuracy = (logits.argmax(dim=1) == torch.tensor(labels)).float().mean().item()

buffer = io.BytesIO()
torch.save(model.state_dict(), buffer)
buffer.seek(0)
copy = Net()
copy.load_state_dict(torch.load(buffer))
same = bool(torch.equal(copy(torch.tensor(points[:5])), model(torch.tensor(points[:5]))))
print(f"accuracy: {accuracy:.3f}")
print(json.dumps({"losses": losses, "accuracy": accuracy, "lr": scheduler.get_last_lr()[0], "reloaded_same": same}))
