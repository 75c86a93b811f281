"""What `ember train` builds: its data sets, the models it can train on them, the optimizer and the LR schedule."""

from __future__ import annotations

from ember import models, optim

DATASETS = ("mnist_sample", "digits", "mnist", "fashion_mnist", "cifar10")
# Read from files (--data DIR, else $EMBER_DATA/<folder>, else ~/.ember/data/<folder>); the others ship with the
# `datasets` extra. The value is the data set's folder under EMBER_DATA.
FILE_DATASETS = {"mnist": "mnist", "fashion_mnist": "fashion-mnist", "cifar10": "cifar10"}
RGB_DATASETS = ("cifar10",)
NUM_CLASSES = 10  # every data set above has ten classes
# One sample's shape (channels, height, width) as the data sets give it, so that a checkpoint's model
# can be built again from its settings alone (ember export) without reading the data.
SAMPLE_SHAPES = {"mnist_sample": (1, 28, 28), "digits": (1, 8, 8), "mnist": (1, 28, 28), "fashion_mnist": (1, 28, 28),
                 "cifar10": (3, 32, 32)}
OPTIMIZERS = ("sgd", "adam", "adamw", "rmsprop", "adagrad")
SCHEDULES = ("onecycle", "cosine", "none")

# Image classifiers only: the data sets are labelled images. The small models adapt to any channel
# count and image size; the ImageNet models are defined for 3-channel input, so only for cifar10.
ANY_IMAGES = ("mlp", "lenet5", "resnet20", "resnet18_cifar")
RGB_ONLY = ("resnet18", "resnet34", "resnet50", "mobilenet_v2", "vgg11", "vgg11_bn", "vgg16", "vgg16_bn", "vgg19",
            "vgg19_bn")
MODELS = ANY_IMAGES + RGB_ONLY
NOT_TRAINABLE = {
    "alexnet": "its stride-4 stem and three max-pools need images of at least 63x63 pixels; the largest here are 32x32",
    "transformer_lm": "it is a language model over token ids, and these data sets are images",
    "lstm_classifier": "it classifies token-id sequences, and these data sets are images",
    "ncf": "it scores (user id, item id) pairs, and these data sets are images",
}


def supported_models_text() -> str:
    """The models `ember train` can train, by data set, as a sentence."""
    return (f"{', '.join(ANY_IMAGES)} on every data set; {', '.join(RGB_ONLY)} on {' and '.join(RGB_DATASETS)} "
            "only (ImageNet models take 3-channel images)")


def check_model(model: str, dataset: str) -> None:
    """Raise ValueError unless `ember train` can train `model` on `dataset`, saying which models it can."""
    if model in MODELS and (model in ANY_IMAGES or dataset in RGB_DATASETS):
        return
    if model in RGB_ONLY:
        why = f"{model} takes 3-channel images and {dataset} has 1-channel ones"
    elif model in NOT_TRAINABLE:
        why = f"ember train can't train {model}: {NOT_TRAINABLE[model]}"
    else:
        why = f"unknown model {model!r}"
    raise ValueError(f"--model {model}: {why}; ember train trains {supported_models_text()}")


def build_model(model: str, dataset: str):
    """The network `ember train` trains as `model` on `dataset` (ten classes, sized for its images)."""
    shape = SAMPLE_SHAPES[dataset]
    return models.get_model(model, num_classes=NUM_CLASSES, in_channels=shape[0], input_size=shape)


def default_lr(optimizer: str) -> float:
    """The (peak) learning rate used when --lr is not given."""
    return 3e-3 if optimizer in ("adam", "adamw") else 0.05


def data_root(name: str, data: str | None):
    """The folder to read data set `name` from with `--data DIR`: DIR/<its folder> when there is one, else DIR."""
    import os

    if data is None:
        return None
    inside = os.path.join(data, FILE_DATASETS[name])
    return inside if os.path.isdir(inside) else data


def check_data(data: str | None, datasets) -> None:
    """Raise ValueError for a `--data DIR` that is no folder, or that none of `datasets` would read."""
    import os

    if data is None:
        return
    if not os.path.isdir(data):
        raise ValueError(f"--data {data}: {'is a file, not a folder' if os.path.exists(data) else 'no such folder'}")
    if not any(d in FILE_DATASETS for d in datasets):
        shipped = " and ".join(datasets)
        raise ValueError(f"--data {data}: {shipped} ship{'s' * (len(datasets) == 1)} with Ember (the `datasets` extra) "
                         f"and read{'s' * (len(datasets) == 1)} no files; --data is for --dataset "
                         f"{', '.join(list(FILE_DATASETS)[:-1])} or {list(FILE_DATASETS)[-1]}")


def load_dataset(name: str, limit: int | None, augment: bool, data: str | None = None):
    """The (train, test) datasets of `name`, the first `limit` training and limit/4 test samples if given.

    `data` is `--data DIR`: the folder holding the files, or one holding the data set's folder.
    A missing file is a FileNotFoundError in the command line's words (--data, EMBER_DATA).
    """
    from ember.datasets.root import MissingDataError

    try:
        return _load_dataset(name, limit, augment, data_root(name, data) if name in FILE_DATASETS else None)
    except MissingDataError as e:
        how = f"pass --data DIR (the folder that holds them) or set EMBER_DATA so that $EMBER_DATA/{e.name} holds them"
        raise FileNotFoundError(e.explain(how)) from None


def _load_dataset(name: str, limit: int | None, augment: bool, root):
    import ember.datasets as ds
    from ember.data import Subset, TransformDataset
    from ember.data.transforms import RandomCrop, ToTensor

    # Random transforms draw from Ember's default generator (no generator of their own), so DataLoader
    # workers reseed them and a checkpoint's copy of that generator restores them.
    if name == "mnist_sample":
        pair = ds.mnist_sample()
        train, test = pair.train, pair.test
        if augment:  # 4,000 digits: small random shifts are worth about a point of accuracy
            train = TransformDataset(train, RandomCrop(28, padding=2))
    elif name == "digits":
        pair = ds.digits()
        train, test = pair.train, pair.test
    elif name in ("mnist", "fashion_mnist"):
        cls = ds.MNIST if name == "mnist" else ds.FashionMNIST
        train, test = cls(root, train=True, transform=ToTensor()), cls(root, train=False, transform=ToTensor())
        if augment:
            train = TransformDataset(train, RandomCrop(28, padding=2))
    else:
        from ember.data.transforms import Compose, Normalize, RandomHorizontalFlip

        norm = Normalize((0.4914, 0.4822, 0.4465), (0.247, 0.243, 0.261))
        crops = [RandomCrop(32, padding=4), RandomHorizontalFlip()] if augment else []
        train = ds.CIFAR10(root, train=True, transform=Compose([*crops, ToTensor(), norm]))
        test = ds.CIFAR10(root, train=False, transform=Compose([ToTensor(), norm]))
    if limit is not None:
        train = Subset(train, range(min(limit, len(train))))
        test = Subset(test, range(min(max(limit // 4, 1), len(test))))
    return train, test


def make_optimizer(name: str, params, lr: float):
    """The optimizer `name` at learning rate `lr` (SGD with momentum 0.9)."""

    if name == "sgd":
        return optim.SGD(params, lr=lr, momentum=0.9)
    if name == "adam":
        return optim.Adam(params, lr=lr)
    if name == "adamw":
        return optim.AdamW(params, lr=lr)
    if name == "rmsprop":
        return optim.RMSprop(params, lr=lr)
    if name == "adagrad":
        return optim.Adagrad(params, lr=lr)
    raise ValueError(f"--optimizer: unknown optimizer {name!r}; expected one of {', '.join(OPTIMIZERS)}")


def make_scheduler(name: str, optimizer, peak_lr: float, total_steps: int):
    """The per-batch schedule `name` over `total_steps` steps peaking at `peak_lr` (None for 'none')."""

    if name == "onecycle":
        # The peak comes from the run's settings, never from the optimizer's current (maybe annealed) lr.
        # Momentum cycles against the lr where the optimizer has one (Adagrad has none: PyTorch refuses to cycle it).
        cycle = any(k in optimizer.defaults for k in ("momentum", "betas"))
        return optim.lr_scheduler.OneCycleLR(optimizer, max_lr=peak_lr, total_steps=total_steps,
                                                cycle_momentum=cycle)
    if name == "cosine":
        return optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=total_steps)
    if name == "none":
        return None
    raise ValueError(f"--schedule: unknown schedule {name!r}; expected one of {', '.join(SCHEDULES)}")
