"""CA-AT's synthetic experiment (Section 3.2, Figure 2): vanilla AT of a logistic regression on MNIST 1 vs 2
with the exact inner maximum, and the gradient conflict μ against the attack budget δ.

Where each formula comes from (caat.txt = the CA-AT paper):

- **Model and loss** (Appendix B, Eq. 12-13): f(x) = wᵀx + b, y ∈ {+1, −1}, p(y|x) = 1 / (1 + exp(−y·f(x))),
  L(f(x), y) = log(1 + exp(−y·f(x))). Section 3.2 says "w ∈ R^{(32×32)×2} via BCE loss"; Appendix B's
  scalar-output model with y = ±1 is what Eq. 3 and 16 are written for, so that is the model here
  (θ = (w, b), d + 1 parameters). The first class of ``classes`` is y = +1, the second y = −1.
- **Exact inner maximum** (Appendix B, Eq. 14-16): under ‖ε‖∞ ≤ δ, max_ε L(f(x + ε), y) is attained at
  ε* = −y·δ·sign(w) (Eq. 15), and L(f(x + ε*), y) = log(1 + exp(−y·f(x) + δ‖w‖₁)) (Eq. 16 = the adversarial
  term of Eq. 3). As in Eq. 3, x + ε* is not clipped to the image range [0, 1].
- **Vanilla AT** (Eq. 2 and 3): min_θ E[λ·L_a + (1 − λ)·L_c] with L_a = L(f(x + ε*), y), L_c = L(f(x), y),
  λ = 0.5. The gradient of L_a is taken at the fixed maximiser ε* (Danskin; it equals the gradient of
  Eq. 16's closed form, δ·sign(w) included).
- **Gradients and μ** (Section 3.1, Eq. 2 and the definition after it): g_c = ∂L_c/∂θ, g_a = ∂L_a/∂θ,
  μ = ‖g_c‖₂·‖g_a‖₂·(1 − cos(g_c, g_a)). Here g_c and g_a are the full-batch gradients of the mean losses over
  the training set (the loss the model minimises), at the parameters after each epoch; ``mu`` is the value
  after the last epoch. The same μ equals ½(‖g_a − g_c‖² − (‖g_a‖ − ‖g_c‖)²) exactly (Appendix A, Eq. 11).
- **Theorem 1's bound** (Theorem 1 and Appendix A, Eq. 6 and 11): to first order g_a = g_c + H·ε with
  H = ∂g_c/∂x ∈ R^{d_θ × d}, and μ ≤ ½·εᵀKε ≤ ½·λ_max·εᵀε, K = HᵀH, λ_max its largest eigenvalue. Under
  ‖ε‖∞ ≤ δ Appendix A bounds εᵀε ≤ d²·δ² (so μ = O(d²δ²), Theorem 1.2): ``bound`` = ½·λ_max·d²·δ², the
  paper's red line. (εᵀε ≤ d·δ² would already do; ``bound_eps`` = ½·λ_max·‖ε*‖² is Eq. 11's last term with
  the actual maximiser, ‖ε*‖² = δ²·#{w_i ≠ 0} ≤ d·δ².) The theorem is stated for one input x; for the
  full-batch gradients, g_a − g_c ≈ (1/N)·Σ_i H_i ε_i, whose norm is at most max_i ‖H_i‖₂·‖ε‖, so λ_max is
  the largest λ_max(K_i) over the training examples. For this model H = −y·p̄·[I; 0] + p̄(1 − p̄)·[x; 1]·wᵀ
  with p̄ = 1 − p(y|x), so K = p̄²·I + c·(x wᵀ + w xᵀ) + e·w wᵀ (c = −y·p̄²(1 − p̄), e = p̄²(1 − p̄)²(‖x‖² + 1))
  and λ_max(K) is p̄² plus the largest eigenvalue of a 2×2 matrix (``lambda_max``; a test checks it against
  the eigenvalues of the autograd Jacobian).
- **Figure 2(a)**: t-SNE of per-sample g_a and g_c of training examples after the last epoch, embedded together,
  for one δ (``tsne_delta``; the paper shows one panel per δ).
- **Figure 2(b)**: clean and adversarial accuracy on the test set (the adversarial one under the exact attack
  at the training δ: correct iff y·f(x) − δ‖w‖₁ > 0), μ and the bound, ‖g_c‖, ‖g_a‖ and 1 − cos against δ.

Not in the paper, chosen here: plain SGD (``lr`` 0.01, no momentum or weight decay), batch 64 (``batch_size``),
w and b initialised uniformly in ±1/√d (``nn.Linear``'s default) from ``seed``, float64 throughout.
At paper scale MNIST's 28×28 images are resized to 32×32 (``image_size``) with
``torch.nn.functional.interpolate`` (bilinear, align_corners=False, i.e. torchvision's ``Resize(32)`` on a
tensor; values stay in [0, 1]); ``resize: pad`` pads 2 black pixels on each side instead. At smaller scales the
catalog's dataset (scikit-learn's 8×8 digits) is used at its own size, and every δ is multiplied by that
dataset's standard L∞ budget over the paper dataset's (both 0.3 for MNIST and digits: δ is unchanged).
"""

from __future__ import annotations

import math
from typing import Any

from tradeoff import data
from tradeoff.analysis.base import register
from tradeoff.config import parse_budget
from tradeoff.core.lazy_imports import LazyModule

torch = LazyModule("torch")  # imported when the analysis runs: the report jobs import this module, not PyTorch
F = LazyModule("torch.nn.functional")

DEFAULTS: dict[str, Any] = {
    "classes": [1, 2], "lam": 0.5, "epochs": 20, "deltas": [0.05, 0.1, 0.15, 0.2, 0.25, 0.3], "seed": 0,
    "lr": 0.01, "batch_size": 64, "image_size": 32, "resize": "bilinear", "tsne_delta": 0.3,
    "tsne_examples": 100, "tsne_perplexity": 30.0,
}


# ---- the model and the exact inner maximum (Appendix B) ---------------------------------------------------

def logits(w: torch.Tensor, b: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """f(x) = wᵀx + b for rows x (N × d)."""
    return x @ w + b


def exact_perturbation(w: torch.Tensor, y: torch.Tensor, delta: float) -> torch.Tensor:
    """Eq. 15: ε* = −y·δ·sign(w), the maximiser of L(f(x + ε), y) over ‖ε‖∞ ≤ δ (N × d)."""
    return -(y[:, None] * delta) * torch.sign(w)[None, :]


def bce(margin: torch.Tensor) -> torch.Tensor:
    """Eq. 13 as a function of the margin y·f(x): log(1 + exp(−margin)), computed stably."""
    return F.softplus(-margin)


def clean_loss(w, b, x, y) -> torch.Tensor:
    """Per-example L_c = log(1 + exp(−y·f(x)))."""
    return bce(y * logits(w, b, x))


def adversarial_loss(w, b, x, y, delta: float) -> torch.Tensor:
    """Per-example L_a = L(f(x + ε*), y) with ε* of Eq. 15 held fixed (its gradient in θ is Danskin's)."""
    eps = exact_perturbation(w.detach(), y, delta)
    return bce(y * logits(w, b, x + eps))


def adversarial_loss_closed_form(w, b, x, y, delta: float) -> torch.Tensor:
    """Eq. 16 (= the adversarial term of Eq. 3): log(1 + exp(−y·f(x) + δ‖w‖₁))."""
    return bce(y * logits(w, b, x) - delta * w.abs().sum())


# ---- gradients, μ and Theorem 1 (Section 3.1, Appendix A) --------------------------------------------------

def per_example_gradients(w, b, x, y, delta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-example g_c and g_a (N × (d + 1), parameters ordered (w, b)): ∂L/∂θ = −y·σ(−y·f(x'))·[x'; 1] at
    x' = x and at x' = x + ε*."""
    def grad(inputs):
        coef = -y * torch.sigmoid(-y * logits(w, b, inputs))
        return torch.cat([coef[:, None] * inputs, coef[:, None]], dim=1)

    return grad(x), grad(x + exact_perturbation(w, y, delta))


def conflict(g_c: torch.Tensor, g_a: torch.Tensor) -> dict[str, float]:
    """‖g_c‖, ‖g_a‖, 1 − cos(g_c, g_a) and μ = ‖g_c‖·‖g_a‖·(1 − cos) (Section 3.1)."""
    norm_c, norm_a = float(g_c.norm()), float(g_a.norm())
    cos = float(g_c @ g_a) / (norm_c * norm_a) if norm_c > 0 and norm_a > 0 else 1.0
    return {"norm_gc": norm_c, "norm_ga": norm_a, "one_minus_cos": 1.0 - cos, "mu": norm_c * norm_a * (1.0 - cos)}


def lambda_max(w, b, x, y) -> torch.Tensor:
    """Per-example largest eigenvalue of K = HᵀH, H = ∂g_c/∂x (Appendix A, Eq. 6 and 11), in closed form.

    K = a·I + U M Uᵀ with U = [x, w], a = p̄², M = [[0, c], [c, e]]; the eigenvalues of U M Uᵀ other than 0 are
    those of the 2×2 matrix M·(UᵀU), so λ_max = a + max(0, largest eigenvalue of M·UᵀU) (for d > 2).
    """
    p_bar = torch.sigmoid(-y * logits(w, b, x))
    a = p_bar ** 2
    c = -y * p_bar ** 2 * (1 - p_bar)
    e = p_bar ** 2 * (1 - p_bar) ** 2 * ((x * x).sum(1) + 1)
    g11, g12, g22 = (x * x).sum(1), x @ w, (w @ w).expand_as(a)
    trace = 2 * c * g12 + e * g22
    det = -c ** 2 * (g11 * g22 - g12 ** 2)
    top = trace / 2 + torch.sqrt(torch.clamp(trace ** 2 / 4 - det, min=0))
    return a + torch.clamp(top, min=0)


def theorem1_bound(lam_max: float, d: int, delta: float) -> float:
    """Theorem 1 (L∞) as Appendix A derives it: μ ≤ ½·λ_max·εᵀε ≤ ½·λ_max·d²·δ²."""
    return 0.5 * lam_max * d ** 2 * delta ** 2


# ---- the experiment ----------------------------------------------------------------------------------------

def _binary(catalog, dataset: str, classes: list[int], image_size: int | None, resize: str):
    """(x_train, y_train, x_test, y_test): flattened float64 images of the two classes, y = +1 / −1."""
    ds = data.load(dataset, catalog.data_root)

    def pick(x, labels):
        keep = (labels == classes[0]) | (labels == classes[1])
        x, labels = x[keep], labels[keep]
        if image_size and x.shape[-1] != image_size:
            if resize == "pad":
                pad = image_size - x.shape[-1]
                x = F.pad(x, (pad // 2, pad - pad // 2, pad // 2, pad - pad // 2))
            else:
                x = F.interpolate(x, size=(image_size, image_size), mode="bilinear", align_corners=False)
        y = torch.where(labels == classes[0], 1.0, -1.0)
        return x.flatten(1).to(torch.float64), y.to(torch.float64)

    return (*pick(ds.x_train, ds.y_train), *pick(ds.x_test, ds.y_test))


def _measure(w, b, x, y, x_test, y_test, delta: float) -> dict[str, float]:
    g_c, g_a = (g.mean(0) for g in per_example_gradients(w, b, x, y, delta))
    out = conflict(g_c, g_a)
    lam = float(lambda_max(w, b, x, y).max())
    d = x.shape[1]
    margin = y_test * logits(w, b, x_test)
    out.update(
        lambda_max=lam, bound=theorem1_bound(lam, d, delta),
        bound_eps=0.5 * lam * delta ** 2 * int((w != 0).sum()),
        half_sq_diff=0.5 * float((g_a - g_c).norm() ** 2),
        clean_acc=float((margin > 0).double().mean()),
        adv_acc=float((margin - delta * w.abs().sum() > 0).double().mean()),
    )
    return out


def train_vanilla_at(x, y, x_test, y_test, delta: float, *, lam: float, epochs: int, lr: float,
                     batch_size: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, list[dict]]:
    """Minibatch SGD on λ·L_a + (1 − λ)·L_c (Eq. 3); returns w, b and the measurements after every epoch."""
    gen = torch.Generator().manual_seed(seed)
    d = x.shape[1]
    bound = 1 / math.sqrt(d)
    w = ((torch.rand(d, generator=gen, dtype=torch.float64) * 2 - 1) * bound).requires_grad_()
    b = ((torch.rand((), generator=gen, dtype=torch.float64) * 2 - 1) * bound).requires_grad_()
    history = []
    for _ in range(epochs):
        order = torch.randperm(len(x), generator=gen)
        for start in range(0, len(x), batch_size):
            idx = order[start:start + batch_size]
            xb, yb = x[idx], y[idx]
            loss = (lam * adversarial_loss(w, b, xb, yb, delta).mean()
                    + (1 - lam) * clean_loss(w, b, xb, yb).mean())
            grad_w, grad_b = torch.autograd.grad(loss, [w, b])
            with torch.no_grad():  # plain SGD (torch.optim would import torch._dynamo: seconds at this size)
                w -= lr * grad_w
                b -= lr * grad_b
        with torch.no_grad():
            history.append(_measure(w, b, x, y, x_test, y_test, delta))
    return w.detach(), b.detach(), history


def tsne_embedding(g_c: torch.Tensor, g_a: torch.Tensor, *, perplexity: float, seed: int) -> list[list[float]]:
    """The per-example g_c (first) and g_a (then) embedded together in 2-D by t-SNE."""
    from sklearn.manifold import TSNE

    points = torch.cat([g_c, g_a]).numpy()
    perplexity = min(perplexity, (len(points) - 1) / 3)
    emb = TSNE(n_components=2, perplexity=perplexity, init="pca", random_state=seed).fit_transform(points)
    return [[round(float(u), 4), round(float(v), 4)] for u, v in emb]


@register("caat_synthetic")
def caat_synthetic(catalog, target: str, params: dict) -> dict:
    """The analysis job of a Figure 2 target: one vanilla-AT run per δ, measurements per epoch, t-SNE at one δ.

    Runs on the CPU with ``runtime.threads`` threads (torch and t-SNE's OpenMP; 0 = the libraries' default):
    at this size more threads than cores only cost time."""
    from threadpoolctl import threadpool_limits

    threads = catalog.runtime_settings.threads
    if not threads:
        return _caat_synthetic(catalog, params)
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with threadpool_limits(limits=threads):
            return _caat_synthetic(catalog, params)
    finally:
        torch.set_num_threads(previous)


def _caat_synthetic(catalog, params: dict) -> dict:
    p = {**DEFAULTS, **params}
    paper_dataset = p["dataset"]
    dataset = catalog.scaled_dataset(paper_dataset)
    factor = (parse_budget(catalog.standard_budget(dataset, "linf"), f"datasets.{dataset}.linf")
              / parse_budget(catalog.standard_budget(paper_dataset, "linf"), f"datasets.{paper_dataset}.linf"))
    image_size = p["image_size"] if dataset == paper_dataset else None
    x, y, x_test, y_test = _binary(catalog, dataset, list(p["classes"]), image_size, p["resize"])

    per_delta, tsne = [], None
    for paper_delta in p["deltas"]:
        delta = paper_delta * factor
        w, b, history = train_vanilla_at(x, y, x_test, y_test, delta, lam=p["lam"], epochs=p["epochs"],
                                         lr=p["lr"], batch_size=p["batch_size"], seed=p["seed"])
        per_delta.append({"delta": delta, "paper_delta": paper_delta, **history[-1],
                          "per_epoch": {k: [h[k] for h in history] for k in history[0]}})
        if math.isclose(paper_delta, p["tsne_delta"]):
            pick = torch.randperm(len(x), generator=torch.Generator().manual_seed(p["seed"]))[:p["tsne_examples"]]
            g_c, g_a = per_example_gradients(w, b, x[pick], y[pick], delta)
            n = len(pick)
            tsne = {"delta": delta, "examples": n, "kind": ["clean"] * n + ["adversarial"] * n,
                    "points": tsne_embedding(g_c, g_a, perplexity=p["tsne_perplexity"], seed=p["seed"])}
    if tsne is None:
        raise ValueError(f"analysis.tsne_delta {p['tsne_delta']} is not one of the deltas {p['deltas']}")
    return {"dataset": dataset, "paper_dataset": paper_dataset, "classes": list(p["classes"]),
            "input_dim": x.shape[1], "train_examples": len(x), "test_examples": len(x_test),
            "image_size": image_size or int(round(math.sqrt(x.shape[1]))),
            "resize": p["resize"] if image_size else None, "budget_factor": factor,
            "lam": p["lam"], "epochs": p["epochs"], "lr": p["lr"], "batch_size": p["batch_size"], "seed": p["seed"],
            "deltas": [r["delta"] for r in per_delta], "per_delta": per_delta, "tsne": tsne}
