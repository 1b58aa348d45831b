"""The labels tstat.pytorch.Hook gives the label rules: register_loss's own
(a classification loss's class ids and scores, when their shapes say one
example per row) and save_labels', which win. Counted against torch.bincount.
Run by ctest (tstat.python.pytorch)."""

import numpy as np
import torch

import tstat.pytorch
from tstat import trials

EVERY_STEP = {"save_config": {"save_interval": 1}}


def one_step(tmp_path, name, loss_fn, scores, targets, labels=True, saved=None):
    """One step whose loss is loss_fn(scores, targets) under register_loss
    (and save_labels(*saved) before it); returns the run."""
    run = str(tmp_path / name)
    # The default rules ask for the labels' class counts.
    with tstat.pytorch.Hook(out_dir=run, config=EVERY_STEP,
                            num_classes=4 if saved is not None else 0) as hook:
        hook.register_loss(loss_fn, labels=labels)
        if saved is not None:
            hook.save_labels(*saved)
        loss_fn(scores, targets)
        hook.step()
    return trials.create_trial(run)


def test_a_classification_loss_gives_its_class_ids_and_scores(tmp_path):
    torch.manual_seed(3)
    targets = torch.tensor([0, 3, 3, 1, 3, 0, 2, 3])
    scores = torch.randn(8, 4)
    for name, loss_fn, given in (("ce", torch.nn.CrossEntropyLoss(), scores),
                                 ("nll", torch.nn.NLLLoss(), scores.log_softmax(1))):
        trial = one_step(tmp_path, name, loss_fn, given, targets)
        assert {"loss", "labels", "predictions"} <= set(trial.tensor_names()), name
        counts, out_of_range = trial.tensor("labels").label_counts(0)
        assert list(counts) == torch.bincount(targets, minlength=4).tolist(), name
        assert out_of_range == 0
        stats = trial.tensor("predictions").stat(0, "max")
        assert np.isclose(stats, given.max().item()), name
    # Padding marked with ignore_index (-100) is not a class.
    padded = torch.tensor([0, 3, -100, 1, 3, -100, 2, 3])
    trial = one_step(tmp_path, "ignored", torch.nn.CrossEntropyLoss(), scores, padded)
    counts, _ = trial.tensor("labels").label_counts(0)
    assert list(counts) == [1, 1, 1, 3]


def test_what_is_not_one_example_per_row_gives_no_labels(tmp_path):
    torch.manual_seed(4)
    ce = torch.nn.CrossEntropyLoss()
    cases = {
        # per token: scores [n, classes, length], class ids [n, length]
        "tokens": (torch.randn(2, 4, 5), torch.randint(0, 4, (2, 5))),
        # class probabilities as targets
        "soft": (torch.randn(8, 4), torch.softmax(torch.randn(8, 4), 1)),
        # more classes than labels have (a vocabulary)
        "vocabulary": (torch.randn(8, 2000), torch.randint(0, 2000, (8,))),
    }
    for name, (scores, targets) in cases.items():
        trial = one_step(tmp_path, name, ce, scores, targets)
        assert "labels" not in trial.tensor_names(), name
        assert "loss" in trial.tensor_names(), name
    # Not a classification loss, or asked not to.
    trial = one_step(tmp_path, "mse", torch.nn.MSELoss(), torch.randn(8, 4), torch.randn(8, 4))
    assert "labels" not in trial.tensor_names()
    trial = one_step(tmp_path, "off", ce, torch.randn(8, 4), torch.randint(0, 4, (8,)),
                     labels=False)
    assert "labels" not in trial.tensor_names()


def test_save_labels_wins_over_the_loss(tmp_path):
    torch.manual_seed(5)
    explicit = torch.tensor([1, 1, 1, 1, 2, 2, 0, 0])
    targets = torch.tensor([3, 3, 3, 3, 3, 3, 3, 3])
    scores = torch.randn(8, 4)
    trial = one_step(tmp_path, "saved", torch.nn.CrossEntropyLoss(), scores, targets,
                     saved=(explicit, scores))
    counts, _ = trial.tensor("labels").label_counts(0)
    assert list(counts) == [2, 4, 2, 0]
