"""The ``learner_tsne`` analysis (Zipper Figure 6): t-SNE of the adversarial images made from the NT learner
and from the AT learner of a Generalist run, at several epochs of its training.

"We choose natural images to generate corresponding adversarial examples of the clean learner and adversarial
learner and visualize these samples by t-SNE as training progresses" (Zipper, Appendix C.1). The learners'
weights come from the run's ``learner_snapshots`` (the method's ``snapshot_epochs``: both learners at the end
of those epochs, before they restart from the global learner). For every snapshot epoch, the same ``examples``
test images (the first of the fixed test-set permutation, as the per-epoch evaluation draws its subset) are
attacked against each learner, and the 2 x examples adversarial images (flattened pixels; ``embed:
perturbations`` embeds x_adv - x instead) are embedded together by one t-SNE per epoch.

Parameters (``analysis:`` of a ``tsne`` figure; declared and checked in tradeoff.core.targets): ``attack`` (an attack of
the catalog's ``attacks``, default pgd20, resolved for the run like its evaluation), ``examples`` (default 500),
``perplexity`` (default 30, capped below a third of the points), ``seed`` (the attacks' batch seeds and t-SNE's
random_state, default 0), ``embed`` (``images``, default, or ``perturbations``). Attacks are built and seeded as
evaluation builds them (batches of ``runtime.eval_batch_size``, batch b seeded with ``batch_seed(seed, b)``), fp32
and eval mode; every image is attacked, including those the learner gets wrong.

The JSON has one panel per (row, epoch): for each source learner the 2-D points (``x``, ``y``, 4 decimals), the
test labels, whether the learner is fooled by its own adversarial image (``fooled``, a 0/1 string), and
``same_source_nn``: the fraction of the 2 x examples points whose nearest neighbour in the embedding was made
from the same learner (0.5: the two sets are mixed; 1: fully separated).
"""

from __future__ import annotations

import copy
from typing import Any

from tradeoff.analysis.base import register
from tradeoff.core.targets import TSNE_DEFAULTS
from tradeoff.evaluation.load import load_model, source_for
from tradeoff.storage import checkpoint


def embed(features, *, perplexity: float, seed: int):
    """2-D t-SNE of the rows of ``features`` (numpy, n x d), seeded; perplexity capped at (n - 1) / 3."""
    from sklearn.manifold import TSNE

    n = len(features)
    tsne = TSNE(n_components=2, perplexity=min(float(perplexity), max((n - 1) / 3.0, 1.0)), init="pca",
                learning_rate="auto", random_state=int(seed))
    return tsne.fit_transform(features)


def same_source_nn(points, sources) -> float:
    """The fraction of points whose nearest other point has the same source."""
    import numpy as np

    d = ((points[:, None, :] - points[None, :, :]) ** 2).sum(-1)
    np.fill_diagonal(d, np.inf)
    return float((sources[d.argmin(1)] == sources).mean())


def panel(learners: dict, x, y, spec: dict, params: dict, *, batch_size: int) -> dict[str, Any]:
    """One epoch's panel: learners (name -> model) attacked on (x, y), their adversarial images embedded."""
    import numpy as np

    from tradeoff.attacks.loop import adversarial, correct

    seed = int(params["seed"])
    adv, fooled = {}, {}
    for name, model in learners.items():
        adv[name] = adversarial(model, x, y, spec, seed=seed, batch_size=batch_size)
        fooled[name] = ~correct(model, adv[name], y, batch_size)
    names = list(learners)
    feats = [(adv[n] - x if params["embed"] == "perturbations" else adv[n]).flatten(1).double().cpu().numpy()
             for n in names]
    points = embed(np.concatenate(feats), perplexity=params["perplexity"], seed=seed)
    sources = np.repeat(np.arange(len(names)), len(y))
    labels = y.cpu().tolist()
    out = {"same_source_nn": round(same_source_nn(points, sources), 4), "sources": {}}
    for i, name in enumerate(names):
        pts = points[sources == i]
        out["sources"][name] = {"x": [round(float(v), 4) for v in pts[:, 0]],
                                "y": [round(float(v), 4) for v in pts[:, 1]], "labels": labels,
                                "fooled": "".join("1" if f else "0" for f in fooled[name].tolist())}
    return out


@register("learner_tsne")
def learner_tsne(catalog, target: str, params: dict) -> dict:
    """The analysis job: for every row, every snapshot epoch of its run's learners, one t-SNE panel."""
    from tradeoff.core.runtime import Runtime
    from tradeoff.data import load_run_data, subset

    p = {**TSNE_DEFAULTS, **params}
    runtime = Runtime.from_config(catalog.runtime_settings, catalog.scale)
    device = runtime.device
    batch_size = catalog.runtime_settings.eval_batch_size
    panels = []
    for row in catalog.targets[target].rows:
        source = source_for(*catalog.model_location(row.run))
        run, path = source.model_id, source.path
        snapshots = checkpoint.load(path).get("learner_snapshots") or {}
        if not snapshots:
            raise ValueError(f"{target}: the checkpoint of run {run} ({path}) has no learner snapshots; set "
                             "`snapshot_epochs` in the run's method (Generalist) and train it again")
        model, _ = load_model(source, device)
        ds = load_run_data(catalog.runs[row.run], catalog.data_root)
        x, y = subset(ds.x_test, ds.y_test, int(p["examples"]))
        x, y = x.to(device), y.to(device)
        spec = catalog.attack_for(p["attack"], row.run)
        for epoch in sorted(snapshots):
            learners = {}
            for name, state in snapshots[epoch].items():
                learners[name] = copy.deepcopy(model)
                learners[name].load_state_dict(state)
                learners[name].float().eval()
            panels.append({"key": row.key, "run": row.run, "epoch": int(epoch),
                           **panel(learners, x, y, spec, p, batch_size=batch_size)})
    return {"examples": len(y) if panels else 0, "attack": p["attack"], "embed": p["embed"],
            "perplexity": float(p["perplexity"]), "seed": int(p["seed"]), "panels": panels}
