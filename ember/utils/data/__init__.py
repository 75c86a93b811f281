"""`ember.utils.data`: PyTorch's `torch.utils.data` layout for `ember.data` (the same objects, not copies).

`from ember.utils.data import DataLoader, Dataset, random_split` and the submodules PyTorch programs
import from (`ember.utils.data.dataset`, `.sampler`, `.dataloader`, `.distributed`) give `ember.data`'s own classes.
"""

import sys as _sys

from ember.data import *  # noqa: F403
from ember.data import __all__, dataloader, dataset, distributed, sampler  # noqa: F401

for _name, _module in (("dataset", dataset), ("sampler", sampler), ("dataloader", dataloader),
                       ("distributed", distributed)):
    _sys.modules[f"{__name__}.{_name}"] = _module  # `import ember.utils.data.sampler` finds ember.data.sampler
