"""The shared sample access of image data sets read from files: transforms, class names, repr."""

from __future__ import annotations

from typing import Any

from ember.data.dataset import Dataset


class LabelledImages(Dataset):
    """A data set of (image, label) pairs; subclasses provide `_raw(index)`, `classes`, `train`, `root`."""

    transform = None
    target_transform = None

    def _raw(self, index: int) -> tuple[Any, Any]:
        """The stored image and label at `index`, before transforms."""
        raise NotImplementedError

    def __getitem__(self, index: int) -> tuple[Any, Any]:
        img, target = self._raw(index)
        if self.transform is not None:
            img = self.transform(img)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return img, target

    @property
    def class_to_idx(self) -> dict[str, int]:
        """Class name -> label."""
        return {c: i for i, c in enumerate(self.classes)}

    def __repr__(self) -> str:
        split = "train" if self.train else "test"
        return f"{type(self).__name__}({split}, {len(self)} samples, root={str(self.root)!r})"
