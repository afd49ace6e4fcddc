"""SOPRC on unseen classes by training budget: 2, 5, 10 and 20 epochs, at 100 to 10,000 classes.

The methods, network, batches and scores of ``bench_soprc_disjoint.py``, on the composite digits
of ``--classes`` classes (``_data.COMPOSITE_SCALES``; ``--large-classes``: tens to hundreds of
items a class, ``_data.LARGE_CLASS_SCALES``), half the classes to train, half unseen to test:

- ``SOPRCEmbedder``: a separate fit per budget (``max_epochs``), with ``--estimator NAME=VALUE``
  changes to its defaults;
- ``SOPRCLoss (plain loop)``: the estimator's loss and settings in the plain loop;
- the pytorch-metric-learning losses at their defaults, scored after each budget's epoch of one
  run (the loop has no schedule: the same as separate fits), and tuned at the last budget on the
  validation split (``--image-disjoint``: the class- and image-disjoint one); SmoothAP (with
  ``--smoothap``) only if an epoch takes at most 3x the other losses'.

Results: after every method (a run cut short keeps what it measured).

Usage::

    python benchmarks/bench_soprc_budget.py --classes 1000 --image-disjoint \\
        --rows SOPRCEmbedder "SOPRCLoss (plain loop)" --tag 1000_classes
    python benchmarks/bench_soprc_budget.py --classes 1000 --image-disjoint --smoothap \\
        --rows FastAP MultiSimilarity Contrastive Triplet SmoothAP --tag 1000_classes_peers
"""

import ast
import inspect

import numpy as np
import torch
from _data import composite_digits, composite_scale, composite_validation
from _harness import parser, results_name, timed
from _results import Results, summary
from bench_soprc_disjoint import (
    CLASSES_PER_BATCH,
    DIMS,
    ESTIMATOR_BUDGET,
    HIDDEN,
    LOSSES,
    LR,
    PER_CLASS,
    SLOW,
    evaluate,
    label,
    plain_loop,
)

from skrank import SOPRCEmbedder
from skrank.losses import SOPRCLoss

BUDGETS = (2, 5, 10, 20)


class BudgetCurve:
    """The rows of the budget curve, saved after every method."""

    def __init__(self, results, budgets, notes, split):
        self.results, self.budgets, self.notes, self.split = results, budgets, notes, split
        self.rows, self.validation_rows = [], []

    def add(self, name, setting, scores, seconds):
        """``scores[budget]``: (seeds, 2) test mAUPRC and R@1; ``seconds[budget]``: per fit."""
        cells = [summary(scores[b][:, 0]) if b in scores else "" for b in self.budgets]
        times = "/".join(f"{seconds[b]:.0f}" if b in seconds else "-" for b in self.budgets)
        self.rows.append([name, label(setting), *cells, summary(scores[max(scores)][:, 1]), times])
        figures = self.results.data["figures"].setdefault("per_seed", {})
        figures[f"{name} | {label(setting)}"] = {
            str(b): {"mauprc": scores[b][:, 0], "recall@1": scores[b][:, 1], "seconds": seconds[b]}
            for b in scores
        }
        print(f"  {name:<34} {label(setting):<40} {'  '.join(cells)}  ({times} s)", flush=True)
        self.save()

    def save(self):
        self.results.data["tables"] = []
        last = max(self.budgets)
        self.results.add_table(
            f"Test mean AUPRC by training budget, {self.notes['classes']} (test classes)",
            ["method", "setting", *(f"{b} epochs" for b in self.budgets), f"R@1 ({last} epochs)",
             "s / fit"],
            self.rows,
            notes=" ".join(self.notes["text"]),
        )  # fmt: skip
        if self.validation_rows:
            self.results.add_table(
                f"Validation scores of the grids ({self.split} split, {last} epochs, seed 0)",
                ["method", "setting", "validation mAUPRC", "validation R@1", "s / fit"],
                self.validation_rows,
            )
        self.results.save()


def scored(embed, data):
    found = evaluate(embed(data[2]), data[3])
    return [found["mAUPRC"], found["R@1"]]


def estimator_at_budgets(setting, data, seeds, budgets, device):
    scores, seconds = {}, {}
    for budget in budgets:
        runs = []
        for seed in seeds:
            parameters = {**ESTIMATOR_BUDGET, "device": device, **setting, "max_epochs": budget}
            model = SOPRCEmbedder(**parameters, random_state=seed)
            _, fit_seconds = timed(model.fit, data[0], data[1], device=device)
            runs.append((scored(model.transform, data), fit_seconds))
        scores[budget] = np.array([run[0] for run in runs])
        seconds[budget] = float(np.mean([run[1] for run in runs]))
    return scores, seconds


def loop_at_budgets(loss, setting, data, seeds, budgets, device):
    """Test scores and training seconds of the plain loop after each budget's epoch."""
    scores, seconds = {b: [] for b in budgets}, {b: [] for b in budgets}

    def report(epoch, embed, trained):
        if epoch in scores:
            scores[epoch].append(scored(embed, data))
            seconds[epoch].append(trained)

    for seed in seeds:
        plain_loop(loss, setting, data[0], data[1], seed, max(budgets), None, report, device)
    return {b: np.array(v) for b, v in scores.items()}, {b: np.mean(v) for b, v in seconds.items()}


def _parameter(item):
    """``("name", value)`` of a ``--estimator NAME=VALUE`` (a Python literal, else a string)."""
    name, separator, text = item.partition("=")
    if not separator:
        raise ValueError(f"--estimator takes NAME=VALUE, not {item!r}.")
    try:
        return name, ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return name, text


def budget_curve(args, results):
    budgets, device = sorted(args.budgets), args.device
    seeds, end = args.seeds[:1] if args.quick else args.seeds, max(args.budgets)
    split = "disjoint validation" if args.image_disjoint else "validation"
    test = composite_digits(args.classes, args.large_classes)
    sizes = " of 10 or more items (--large-classes)" if args.large_classes else ""
    notes = {
        "classes": f"{args.classes:,} classes{sizes}",
        "text": [
            f"{args.classes:,} classes ({composite_scale(args.classes, args.large_classes)}), "
            f"half to train, half unseen to test; MLP {HIDDEN[0]} hidden, {DIMS} dims, SGD lr "
            f"{LR} momentum 0.9 weight decay 4e-4, batches of {CLASSES_PER_BATCH} classes x "
            f"{PER_CLASS}, one torch thread; mean ± sd over seeds {seeds}; device {device}. "
            "SOPRCEmbedder: a separate fit per budget (max_epochs); plain loops: scored after "
            "each budget's epoch of one run (no schedule: the same as separate fits). s / fit: "
            "training seconds at each budget."
        ],
    }
    curve = BudgetCurve(results, budgets, notes, split)
    wanted = args.rows or ["SOPRCEmbedder", *(n for n in LOSSES if args.smoothap or n not in SLOW)]
    if "SOPRCEmbedder" in wanted:
        setting = dict(_parameter(item) for item in args.estimator)
        found = estimator_at_budgets(setting, test, seeds, budgets, device)
        curve.add("SOPRCEmbedder", setting, *found)
    if "SOPRCLoss (plain loop)" in wanted:
        # The loss the estimator trains, in the plain loop: the fit-time ratio of the targets.
        accepted = inspect.signature(SOPRCLoss).parameters
        loss_setting = {k: v for k, v in SOPRCEmbedder().get_params().items() if k in accepted}
        name = "SOPRCLoss (plain loop)"
        found = loop_at_budgets(name, loss_setting, test, seeds, budgets, device)
        curve.add(name, {"the estimator's loss": "defaults"}, *found)
    epoch_seconds = []
    for name in [n for n in LOSSES if n in wanted and n != "SOPRCLoss (plain loop)"]:
        grid = LOSSES[name][1]
        if name in SLOW and epoch_seconds:  # run only at most 3x the others' epoch time
            probe = loop_at_budgets(name, grid[0], test, seeds[:1], [1], device)[1][1]
            ratio = probe / np.mean(epoch_seconds)
            results.add_figure(f"{name.lower()}_epoch_time_ratio", ratio)
            if ratio > 3:
                notes["text"].append(
                    f"{name} left out: one epoch took {ratio:.1f}x the mean epoch of the other "
                    "PML losses (at most 3x)."
                )
                curve.save()
                continue
        if not args.tuned_only:
            scores, seconds = loop_at_budgets(name, grid[0], test, seeds, budgets, device)
            epoch_seconds.append(seconds[end] / end)
            curve.add(name, grid[0], scores, seconds)
        if args.quick or args.no_tuning or len(grid) == 1:
            continue
        validation = composite_validation(args.classes, args.large_classes, args.image_disjoint)
        values = []
        for setting in grid:
            embed, fit_seconds = timed(
                plain_loop, name, setting, *validation[:2], 0, end, None, None, device,
                device=device,
            )  # fmt: skip
            score = scored(embed, validation)
            values.append(score[0])
            curve.validation_rows.append(
                [name, label(setting), f"{score[0]:.4f}", f"{score[1]:.4f}", f"{fit_seconds:.1f}"]
            )
        best = int(np.argmax(values))
        if best != 0 or args.tuned_only:
            scores, seconds = loop_at_budgets(name, grid[best], test, seeds, [end], device)
        else:
            scores, seconds = {end: scores[end]}, {end: seconds[end]}
        curve.add(f"{name}, tuned", grid[best], scores, seconds)


def main(argv=None):
    arguments = parser(__doc__, "quick", "seeds", "tag", "device", seeds=[0, 1, 2], device="cpu")
    add = arguments.add_argument
    add("--classes", type=int, choices=[100, 1000, 10000], default=100, help="number of classes")
    add("--large-classes", action="store_true", help="tens to hundreds of items a class")
    add("--budgets", type=int, nargs="+", default=list(BUDGETS), help="epochs")
    add("--rows", nargs="+", help="only these methods")
    add("--estimator", nargs="+", default=[], metavar="NAME=VALUE",
        help="SOPRCEmbedder's parameters changed from its defaults (Python literals)")  # fmt: skip
    add("--no-tuning", action="store_true", help="the peers at their defaults only")
    add("--tuned-only", action="store_true", help="the peers' grids and tuned rows only")
    add("--image-disjoint", action="store_true", help="tune on the image-disjoint validation")
    add("--smoothap", action="store_true", help="add SmoothAP (slow)")
    args = arguments.parse_args(argv)
    torch.set_num_threads(1)
    name = results_name("bench_soprc_budget", args, args.large_classes and "large")
    budget_curve(args, Results(name, packages=["pytorch-metric-learning"]))


if __name__ == "__main__":
    main()
