"""CA-AT Figure 2 (the synthetic experiment): the exact inner maximum is the maximum, the gradients are the
losses' gradients, μ is its definition, Theorem 1's bound holds on the data, and the figure builds from the
analysis JSON alone; Snakemake builds caat_figure2 at smoke scale."""

from __future__ import annotations

import copy
import itertools
import json
import shutil

import pytest
import torch
from helpers import run, workflow_copy
from PIL import Image

from tradeoff import analysis
from tradeoff import config as cfg
from tradeoff.analysis import caat_synthetic as cs
from tradeoff.report.build import build_target


def tiny_problem(d=5, n=8, seed=0):
    gen = torch.Generator().manual_seed(seed)
    w = torch.randn(d, generator=gen, dtype=torch.float64)
    b = torch.randn((), generator=gen, dtype=torch.float64)
    x = torch.rand(n, d, generator=gen, dtype=torch.float64)
    y = torch.where(torch.arange(n) % 2 == 0, 1.0, -1.0).double()
    return w, b, x, y


def loss_at(w, b, x, y, eps):
    return cs.bce(y * cs.logits(w, b, x + eps))


# ---- Appendix B: the exact inner maximum --------------------------------------------------------------------

@pytest.mark.parametrize("delta", [0.05, 0.3, 1.0])
def test_exact_inner_maximum_beats_every_feasible_perturbation(delta):
    w, b, x, y = tiny_problem()
    eps_star = cs.exact_perturbation(w, y, delta)
    assert eps_star.abs().max() <= delta + 1e-12
    best = loss_at(w, b, x, y, eps_star)
    # Eq. 16: the closed form log(1 + exp(−y·f(x) + δ‖w‖₁)) is the loss at ε*
    torch.testing.assert_close(best, cs.adversarial_loss_closed_form(w, b, x, y, delta))
    torch.testing.assert_close(best, cs.adversarial_loss(w, b, x, y, delta))
    # brute force: the loss is monotone in the linear term yᵀwε, so the box's maximum is at one of its 2^d vertices
    signs = list(itertools.product([-1.0, 1.0], repeat=x.shape[1]))
    vertices = torch.tensor(signs, dtype=torch.float64) * delta  # 32 x d
    on_vertices = torch.stack([loss_at(w, b, x, y, v.expand_as(x)) for v in vertices])  # 32 x n
    torch.testing.assert_close(on_vertices.max(0).values, best)
    # random points of the box, and PGD (sign-gradient ascent with projection) from random starts
    gen = torch.Generator().manual_seed(1)
    for _ in range(200):
        eps = (torch.rand(x.shape, generator=gen, dtype=torch.float64) * 2 - 1) * delta
        assert (loss_at(w, b, x, y, eps) <= best + 1e-12).all()
    eps = ((torch.rand(x.shape, generator=gen, dtype=torch.float64) * 2 - 1) * delta).requires_grad_()
    for _ in range(50):
        (grad,) = torch.autograd.grad(loss_at(w, b, x, y, eps).sum(), eps)
        eps = (eps + delta / 10 * grad.sign()).clamp(-delta, delta).detach().requires_grad_()
    pgd = loss_at(w, b, x, y, eps).detach()
    assert (pgd <= best + 1e-12).all()
    torch.testing.assert_close(pgd, best)  # PGD finds the same maximum


def test_gradients_are_the_losses_gradients_danskin_included():
    """g_c and g_a in closed form equal autograd of L_c and of Eq. 16's closed form (δ·sign(w) included)."""
    w, b, x, y = tiny_problem(d=6, n=5)
    delta = 0.2
    g_c, g_a = cs.per_example_gradients(w, b, x, y, delta)
    for i in range(len(x)):
        wi, bi = w.clone().requires_grad_(), b.clone().requires_grad_()
        expected_c = torch.autograd.grad(cs.clean_loss(wi, bi, x[i:i + 1], y[i:i + 1]).sum(), [wi, bi])
        expected_a = torch.autograd.grad(cs.adversarial_loss_closed_form(wi, bi, x[i:i + 1], y[i:i + 1], delta).sum(),
                                         [wi, bi])
        torch.testing.assert_close(g_c[i], torch.cat([expected_c[0], expected_c[1][None]]))
        torch.testing.assert_close(g_a[i], torch.cat([expected_a[0], expected_a[1][None]]))


# ---- Section 3.1 and Appendix A: μ and Theorem 1 ------------------------------------------------------------

def test_mu_is_its_definition():
    gen = torch.Generator().manual_seed(3)
    for _ in range(5):
        g_c, g_a = (torch.randn(7, generator=gen, dtype=torch.float64) for _ in range(2))
        out = cs.conflict(g_c, g_a)
        nc, na = (sum(v * v for v in g.tolist()) ** 0.5 for g in (g_c, g_a))
        dot = sum(u * v for u, v in zip(g_c.tolist(), g_a.tolist()))
        assert out["norm_gc"] == pytest.approx(nc) and out["norm_ga"] == pytest.approx(na)
        assert out["one_minus_cos"] == pytest.approx(1 - dot / (nc * na))
        assert out["mu"] == pytest.approx(nc * na * (1 - dot / (nc * na)))
        # Appendix A, Eq. 11 (exact part): μ = ‖g_c‖‖g_a‖ − g_cᵀg_a = ½(‖g_a − g_c‖² − (‖g_a‖ − ‖g_c‖)²)
        diff = float((g_a - g_c).norm()) ** 2
        assert out["mu"] == pytest.approx(nc * na - dot)
        assert out["mu"] == pytest.approx(0.5 * (diff - (na - nc) ** 2))
    assert cs.conflict(g_c, g_c)["mu"] == pytest.approx(0, abs=1e-12)
    assert cs.conflict(g_c, -g_c)["one_minus_cos"] == pytest.approx(2)


def test_lambda_max_is_the_top_eigenvalue_of_HtH():
    """λ_max of K = HᵀH, H = ∂g_c/∂x, in closed form against the autograd Jacobian's eigenvalues."""
    w, b, x, y = tiny_problem(d=6, n=6, seed=4)
    w = w * 0.7  # mixed confidences
    closed = cs.lambda_max(w, b, x, y)
    for i in range(len(x)):
        def g_c(xi, i=i):
            return cs.per_example_gradients(w, b, xi[None], y[i:i + 1], 0.0)[0][0]

        H = torch.autograd.functional.jacobian(g_c, x[i])  # (d + 1) x d
        assert H.shape == (7, 6)
        assert float(closed[i]) == pytest.approx(float(torch.linalg.eigvalsh(H.T @ H).max()), rel=1e-9)


def test_first_order_expansion_of_theorem1():
    """Appendix A, Eq. 6: g_a = g_c + H·ε* to first order (error O(δ²)), so ‖g_a − g_c‖ ≤ √λ_max·‖ε*‖ + O(δ²)."""
    w, b, x, y = tiny_problem(d=6, n=4, seed=5)
    errors = []
    for delta in (1e-2, 1e-3):
        g_c, g_a = cs.per_example_gradients(w, b, x, y, delta)
        eps = cs.exact_perturbation(w, y, delta)
        for i in range(len(x)):
            H = torch.autograd.functional.jacobian(
                lambda xi, i=i: cs.per_example_gradients(w, b, xi[None], y[i:i + 1], 0.0)[0][0], x[i])
            errors.append(float((g_a[i] - g_c[i] - H @ eps[i]).norm()))
            lam = float(cs.lambda_max(w, b, x[i:i + 1], y[i:i + 1]))
            assert float((g_a[i] - g_c[i]).norm()) <= lam ** 0.5 * float(eps[i].norm()) * (1 + 10 * delta)
    assert max(errors[len(x):]) < max(errors[:len(x)]) / 50  # δ ten times smaller: error ~100 times smaller


# ---- the analysis on the smoke catalog ----------------------------------------------------------------------

def smoke_catalog(results):
    config = copy.deepcopy(cfg.load_config([cfg.ROOT / "config/config.yaml", cfg.ROOT / "config/smoke.yaml"]))
    config["paths"]["results"] = str(results)
    return cfg.resolve(config)


@pytest.fixture(scope="module")
def analysed(tmp_path_factory):
    """caat_figure2's analysis at smoke scale (8×8 digits 1 vs 2, six δ, 20 epochs): about a second."""
    catalog = smoke_catalog(tmp_path_factory.mktemp("caat") / "results")
    path = analysis.run_analysis(catalog, "caat_figure2")
    return catalog, json.loads(path.read_text())


def test_catalog_entry_and_its_smoke_remapping(analysed):
    catalog, data = analysed
    spec = catalog.targets["caat_figure2"]
    assert spec.plot == "caat_synthetic" and spec.rows == ()
    assert list(spec.analysis.get("deltas")) == [0.05, 0.1, 0.15, 0.2, 0.25, 0.3] and spec.analysis.get("lam") == 0.5
    assert catalog.analysis_datasets("caat_figure2") == ["digits"] and catalog.analysis_train_ids("caat_figure2") == []
    assert cfg.load_catalog([cfg.ROOT / "config/config.yaml"]).analysis_datasets("caat_figure2") == ["mnist"]
    # digits' standard L∞ budget over MNIST's is 0.3 / 0.3: the δs stay as they are
    assert (data["dataset"], data["input_dim"], data["budget_factor"]) == ("digits", 64, 1.0)
    assert data["deltas"] == pytest.approx(spec.analysis.get("deltas"))
    assert data["scale"] == "smoke" and data["epochs"] == 20


def test_theorem1_bound_holds_and_mu_grows_with_delta(analysed):
    _, data = analysed
    rows = data["per_delta"]
    for row in rows:
        d, delta = data["input_dim"], row["delta"]
        assert row["bound"] == pytest.approx(0.5 * row["lambda_max"] * d ** 2 * delta ** 2)
        assert row["mu"] == pytest.approx(row["norm_gc"] * row["norm_ga"] * row["one_minus_cos"])
        per_epoch = row["per_epoch"]
        assert len(per_epoch["mu"]) == data["epochs"]
        for mu, bound, bound_eps, half_sq in zip(per_epoch["mu"], per_epoch["bound"], per_epoch["bound_eps"],
                                                 per_epoch["half_sq_diff"]):
            assert 0 <= mu <= half_sq + 1e-12  # exact (Eq. 11 before its first-order step)
            assert mu <= bound_eps <= bound    # Theorem 1 (L∞), with the actual ε* and as the paper states it
    mus = [r["mu"] for r in rows]
    adv = [r["adv_acc"] for r in rows]
    assert mus == sorted(mus) and mus[-1] > 10 * mus[0]  # the paper: μ grows (almost quadratically) with δ
    assert adv == sorted(adv, reverse=True) and adv[0] > adv[-1]
    assert all(r["adv_acc"] <= r["clean_acc"] for r in rows)


def test_analysis_json_has_every_field_the_figure_needs(analysed):
    _, data = analysed
    assert {"input_dim", "dataset", "classes", "lam", "epochs", "train_examples", "test_examples", "deltas",
            "per_delta", "tsne", "scale"} <= set(data) and "provenance" not in data  # that one: in the sidecar
    need = {"delta", "paper_delta", "clean_acc", "adv_acc", "mu", "bound", "bound_eps", "lambda_max", "norm_gc",
            "norm_ga", "one_minus_cos", "per_epoch"}
    assert all(need <= set(r) for r in data["per_delta"]) and len(data["per_delta"]) == 6
    tsne = data["tsne"]
    n = tsne["examples"]
    assert tsne["delta"] == pytest.approx(0.3) and n == 100
    assert len(tsne["points"]) == 2 * n and all(len(p) == 2 for p in tsne["points"])
    assert tsne["kind"] == ["clean"] * n + ["adversarial"] * n


def test_analysis_is_deterministic(analysed):
    catalog, _ = analysed
    params = {"dataset": "mnist", "deltas": [0.1, 0.3], "epochs": 2, "tsne_delta": 0.1, "tsne_examples": 20}
    first, second = (cs.caat_synthetic(catalog, "caat_figure2", params) for _ in range(2))
    assert json.dumps(first) == json.dumps(second)


def test_figure_builds_from_the_analysis_json_alone(analysed, tmp_path):
    catalog, data = analysed
    fresh = smoke_catalog(tmp_path / "results")  # nothing but the JSON in its results
    target = fresh.layout.analysis("caat_figure2")
    target.parent.mkdir(parents=True)
    shutil.copy(catalog.layout.analysis("caat_figure2"), target)
    paths = build_target(fresh, "caat_figure2")
    png = next(p for p in paths if p.suffix == ".png")
    with Image.open(png) as img:
        img.verify()
    with Image.open(png) as img:
        assert img.size[0] > 1000 and img.size[1] > 300
        assert len(img.convert("L").getcolors(maxcolors=1 << 16) or []) > 10
    pdf = next(p for p in paths if p.suffix == ".pdf")
    assert pdf.read_bytes()[:5] == b"%PDF-" and pdf.stat().st_size > 1000
    assert sorted(p.name for p in fresh.results.rglob("*") if p.is_file()) == [
        "caat_figure2.json", "caat_figure2.pdf", "caat_figure2.png"]


def test_figure_without_analysis_says_so(tmp_path):
    paths = build_target(smoke_catalog(tmp_path / "results"), "caat_figure2")
    assert all(p.stat().st_size > 0 for p in paths)


def fake_mnist(name, root="data", **kwargs):
    """28×28 stand-in for MNIST (no download in tests): labels 0..3, images in [0, 1]."""
    from tradeoff.data import Data

    gen = torch.Generator().manual_seed(0)
    x = lambda n: torch.rand(n, 1, 28, 28, generator=gen)  # noqa: E731
    y = lambda n: torch.arange(n) % 4  # noqa: E731
    return Data(x(40), y(40), x(20), y(20), 10, tuple(map(str, range(10))), name)


def test_paper_scale_resizes_mnist_to_32x32(monkeypatch, tmp_path):
    monkeypatch.setattr("tradeoff.data.load", fake_mnist)
    config = copy.deepcopy(cfg.load_config([cfg.ROOT / "config/config.yaml"]))
    config["paths"]["results"] = str(tmp_path)
    catalog = cfg.resolve(config)
    x, y, x_test, _ = cs._binary(catalog, "mnist", [1, 2], 32, "bilinear")
    assert x.shape == (20, 1024) and x_test.shape == (10, 1024) and x.dtype == torch.float64
    assert 0 <= float(x.min()) and float(x.max()) <= 1 and sorted(set(y.tolist())) == [-1.0, 1.0]
    padded, _, _, _ = cs._binary(catalog, "mnist", [1, 2], 32, "pad")
    images = padded.view(-1, 32, 32)
    assert float(images[:, :2].abs().sum() + images[:, -2:].abs().sum() + images[:, :, :2].abs().sum()) == 0
    original = fake_mnist("mnist").x_train[(torch.arange(40) % 4 == 1) | (torch.arange(40) % 4 == 2)]
    torch.testing.assert_close(images[:, 2:30, 2:30], original[:, 0].double())
    params = {**catalog.targets["caat_figure2"].analysis.as_dict(), "epochs": 1, "tsne_examples": 10}
    params.pop("name")
    data = cs.caat_synthetic(catalog, "caat_figure2", params)
    assert (data["dataset"], data["input_dim"], data["image_size"], data["resize"]) == ("mnist", 1024, 32, "bilinear")
    assert len(data["tsne"]["points"]) == 20


@pytest.mark.slow
def test_snakemake_builds_caat_figure2_at_smoke_scale(tmp_path):
    work = workflow_copy(tmp_path)
    run(["snakemake", "caat_figure2", "--cores", "1", "--configfile", "config/smoke.yaml"], work, timeout=300)
    data = json.loads((work / "results" / "smoke" / "analysis" / "caat_figure2.json").read_text())
    assert data["scale"] == "smoke" and data["dataset"] == "digits" and len(data["per_delta"]) == 6
    for suffix in (".png", ".pdf"):
        assert (work / "results" / "smoke" / "figures" / f"caat_figure2{suffix}").stat().st_size > 1000
    assert not (work / "results" / "smoke" / "checkpoints").exists()  # no training run: the analysis is its own
